"""Tracing is configured only by OTEL_EXPORTER_OTLP_ENDPOINT, and leaves DBOS's own tracing off."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dbos
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import vmplane.pipeline.workflows  # noqa: F401 - its decorators need the real DBOS, before the fake below
from vmplane.observe import tracing
from vmplane.pipeline import engine
from vmplane.settings import Settings


def memory_exporter() -> InMemorySpanExporter:
    """Trace into memory from now on (undo with `tracing.install(None)`); the exporter holds the spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    return exporter


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(tracing, "_checked", False)
    yield
    tracing.install(None)


def test_no_endpoint_means_no_provider_and_no_span(fresh, monkeypatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.setup() is False
    assert not tracing.enabled()
    with tracing.span("vmplane.job", {"vmplane.job": "j"}) as s:
        assert s is None
    assert tracing.start("ec2.DescribeVpcs", {}) is None


def test_an_endpoint_exports_over_otlp_http_from_a_provider_of_vmplanes_own(fresh, monkeypatch) -> None:
    received: list[tuple[str, bytes]] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # The exporter reads the endpoint (and OTEL_EXPORTER_OTLP_HEADERS, ...) from the environment itself.
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert tracing.setup()
        with tracing.span("vmplane.job", {"vmplane.job": "job-1"}):
            tracing.end(tracing.start("ec2.CreateVpc", {}), {"vmplane.outcome": "ok"})
        tracing.flush()
        tracing._provider.shutdown()
    finally:
        server.shutdown()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # the global one is untouched
    names = []
    for path, body in received:
        assert path == "/v1/traces"
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
            names += [sp.name for ss in rs.scope_spans for sp in ss.spans]
    assert sorted(names) == ["ec2.CreateVpc", "vmplane.job"]


def test_dbos_is_launched_without_its_own_tracing(monkeypatch, tmp_path) -> None:
    seen: dict[str, Any] = {}

    class FakeDBOS:
        def __init__(self, config: dict[str, Any]) -> None:
            seen.update(config)

        @staticmethod
        def launch() -> None:
            pass

        @staticmethod
        def register_queue(name: str, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(dbos, "DBOS", FakeDBOS)
    monkeypatch.setattr(engine, "_launched", threading.Event())
    engine.launch(Settings(home=tmp_path))
    assert seen and "enable_otlp" not in seen and "otlp_traces_endpoints" not in seen
