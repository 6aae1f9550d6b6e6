"""Cloud-call outcomes where the retries happen: botocore's events (against a local HTTP server that
answers what the test scripts) and the GCP retry loop; each counted, logged and traced."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import botocore.retries.standard
import pytest
from botocore.exceptions import ClientError
from google.api_core import exceptions as gexc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from vmplane.clouds import waits
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.gcp import session as gcp_session
from vmplane.observe import logs, metrics, tracing

from .test_observe_traces import memory_exporter

OK = (
    200,
    "<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/t</Arn>"
    "<UserId>T</UserId><Account>123456789012</Account></GetCallerIdentityResult>"
    "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></GetCallerIdentityResponse>",
)


def error(status: int, code: str) -> tuple[int, str]:
    return status, (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>m</Message></Error>"
        "<RequestId>r</RequestId></ErrorResponse>"
    )


class Script:
    """A fake STS endpoint answering the scripted (status, body) pairs in order."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, str]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                status, body = script.answers.pop(0)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def observed(monkeypatch) -> Iterator[tuple[InMemorySpanExporter, io.StringIO]]:
    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0)
    monkeypatch.setattr(waits.random, "uniform", lambda a, b: 0.0)  # the transport's jitter (waits.retry)
    exporter = memory_exporter()
    out = io.StringIO()
    logs.configure("json", "info", out)
    yield exporter, out
    tracing.install(None)
    logs.reset()


@pytest.fixture
def sts() -> Iterator[tuple[Script, Any]]:
    script = Script()
    yield script, AwsClients(AwsTarget(region="us-east-1", endpoint_url=script.url)).sts
    script.server.shutdown()


def counts(cloud: str, method: str) -> dict[str, float]:
    service, _, operation = method.partition(".")
    labels = {"cloud": cloud, "service": service, "operation": operation}
    return {
        o: metrics.REGISTRY.get_sample_value("vmplane_cloud_api_calls_total", {**labels, "outcome": o}) or 0.0
        for o in metrics.OUTCOMES
    }


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def test_aws_throttled_twice_then_ok(observed, sts) -> None:
    exporter, out = observed
    script, client = sts
    script.answers = [error(400, "Throttling"), error(400, "Throttling"), OK]
    before = counts("aws", "sts.GetCallerIdentity")
    assert client.get_caller_identity()["Account"] == "123456789012"
    assert delta(before, counts("aws", "sts.GetCallerIdentity")) == {"throttled": 2, "ok": 1}
    (span,) = exporter.get_finished_spans()
    assert span.name == "sts.GetCallerIdentity"
    assert span.attributes["vmplane.outcome"] == "retried" and span.attributes["vmplane.retries"] == 2
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["level"] == "warning" and "succeeded after 2 retries (2 throttled)" in line["message"]


def test_aws_a_5xx_retried_then_a_final_refusal(observed, sts) -> None:
    exporter, _ = observed
    script, client = sts
    script.answers = [error(503, "ServiceUnavailable"), error(400, "InvalidParameterValue")]
    before = counts("aws", "sts.GetCallerIdentity")
    with pytest.raises(ClientError):
        client.get_caller_identity()
    assert delta(before, counts("aws", "sts.GetCallerIdentity")) == {"retried": 1, "failed": 1}
    (span,) = exporter.get_finished_spans()
    assert span.attributes["vmplane.outcome"] == "failed" and not span.status.is_ok


def test_aws_a_first_refusal_is_one_failed_call_logged_at_info(observed, sts) -> None:
    _, out = observed
    script, client = sts
    script.answers = [error(403, "AccessDenied")]
    before = counts("aws", "sts.GetCallerIdentity")
    with pytest.raises(ClientError):
        client.get_caller_identity()
    assert delta(before, counts("aws", "sts.GetCallerIdentity")) == {"failed": 1}
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["level"] == "info" and line["message"] == "aws sts.GetCallerIdentity failed: AccessDenied"


def test_gcp_throttled_then_ok_and_a_not_found(observed) -> None:
    exporter, _ = observed
    clients = gcp_session.GcpClients(gcp_session.GcpTarget("p", "europe-west1", endpoint_url="http://127.0.0.1:9"))
    answers: list[Any] = [gexc.TooManyRequests("slow down"), "done"]

    def insert() -> Any:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    before = counts("gcp", "compute.networks.insert")
    assert clients.call("compute.networks.insert", insert) == "done"
    assert delta(before, counts("gcp", "compute.networks.insert")) == {"throttled": 1, "ok": 1}

    before = counts("gcp", "compute.networks.get")
    with pytest.raises(NotFoundError):
        clients.call("compute.networks.get", lambda: (_ for _ in ()).throw(gexc.NotFound("no")))
    assert delta(before, counts("gcp", "compute.networks.get")) == {"failed": 1}
    names = {s.name: s.attributes["vmplane.outcome"] for s in exporter.get_finished_spans()}
    assert names == {"compute.networks.insert": "retried", "compute.networks.get": "failed"}


def test_without_a_provider_no_span_is_made(sts) -> None:
    script, client = sts
    script.answers = [OK]
    tracing.install(None)
    before = counts("aws", "sts.GetCallerIdentity")
    client.get_caller_identity()
    assert delta(before, counts("aws", "sts.GetCallerIdentity")) == {"ok": 1}
    assert not tracing.enabled()
