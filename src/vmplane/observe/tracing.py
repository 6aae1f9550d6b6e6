"""OpenTelemetry spans: `vmplane.job` per job phase, a child per step, a child per cloud call.

Tracing is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the OTLP/HTTP exporter reads it and the
other `OTEL_EXPORTER_OTLP_*` variables itself), or when a test installs a provider. Otherwise there is no
provider, `enabled()` is False and every helper here returns before touching OpenTelemetry.

vmplane keeps its provider to itself, never the global one: DBOS 3.x creates its workflow/step spans and
sets a global provider only with `enable_otlp` in its config, which `pipeline.engine` leaves unset, so
DBOS stays silent and the two never compete for `trace.set_tracer_provider` (settable once per process).
Context still flows through OpenTelemetry's contextvars, so a step's span is its job's child in any
thread that runs in a copy of the job's context.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_tracer: Any = None
_provider: Any = None
_checked = False


def enabled() -> bool:
    return _tracer is not None


def setup() -> bool:
    """Configure the OTLP exporter if the environment asks for it (once per process); True if tracing.
    The exporter reads its endpoint, headers and timeouts from the environment itself."""
    global _checked
    env = os.environ
    if _checked:
        return enabled()
    _checked = True
    if not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "vmplane")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    install(provider)
    return True


def install(provider: Any) -> None:
    """Trace into `provider` (a TracerProvider), or stop tracing with None. Tests pass one with an
    in-memory exporter."""
    global _tracer, _provider, _checked
    _checked = True
    _provider = provider
    _tracer = None if provider is None else provider.get_tracer("vmplane")


def flush() -> None:
    """Export spans still buffered (the CLI exits without interpreter finalisation)."""
    if _provider is not None:
        _provider.force_flush()


@contextmanager
def span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A span around the body, current for it (children started inside nest under it); yields None
    when tracing is off. An exception marks the span as an error and is re-raised."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as s:
        yield s


def start(name: str, attributes: dict[str, Any]) -> Any:
    """A span started now as a child of the current one and not made current (a cloud call's: it is
    started and ended by SDK hooks, with nothing nested in it). None when tracing is off."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, attributes=attributes)


def end(s: Any, attributes: dict[str, Any], error: str | None = None) -> None:
    if s is None:
        return
    from opentelemetry.trace import Status, StatusCode

    s.set_attributes(attributes)
    if error is not None:
        s.set_status(Status(StatusCode.ERROR, error))
    s.end()
