"""One apply and destroy of examples/fixed.jsonc through the API, seen from the outside three ways: /metrics
(behind its own token), JSON logs (with credentials and runtime secrets planted, none of which may appear)
and traces (the SDK's in-memory exporter: a job span, its steps as children, cloud calls under them)."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from tests.helpers import EXAMPLES, Sandbox
from tests.integration.test_apply_destroy import PROVISION
from tests.unit.test_observe_traces import memory_exporter

from vmplane.envspec.load import load_spec

METRICS_TOKEN = "metrics-token-3f9c2e71d0b84a56"
PLANTED = {
    "AWS_SECRET_ACCESS_KEY": "planted/AwsSecretKey+9f8e7d6c5b4a3f2e1d0c9b8a7",
    "AWS_SESSION_TOKEN": "plantedSessionTokenFwoGZXIvYXdzEJr//////////wEaDM",
    "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.planted-oauth-token-a1b2c3d4e5",
}
RUNTIME_SECRET = "planted-runtime-secret-7c1d9e"
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEplantedKEYmaterial0123456789\n-----END PRIVATE KEY-----\n"


@pytest.fixture
def observed(sandbox: Sandbox, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, io.StringIO]]:
    from vmplane.observe import logs, tracing
    from vmplane.settings import get_settings

    monkeypatch.setenv("VMPLANE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VMPLANE_SANDBOX_PORT", str(sandbox.port))
    monkeypatch.setenv("VMPLANE_GCP_SANDBOX_PORT", str(sandbox.gcp_port))
    monkeypatch.setenv("VMPLANE_METRICS_TOKEN", METRICS_TOKEN)
    for k, v in PLANTED.items():  # the sandbox never reads them; a log line must not either
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    exporter = memory_exporter()
    stream = io.StringIO()
    logs.configure("json", "info", stream)
    try:
        yield exporter, stream
    finally:
        from vmplane.pipeline import engine

        engine.shutdown()
        tracing.install(None)
        logs.reset()
        monkeypatch.undo()
        get_settings.cache_clear()


def _wait(c: Any, job_id: str, headers: dict[str, str], *done: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        job = c.get(f"/provisioning-jobs/{job_id}", headers=headers).json()
        if job["status"] in done:
            return dict(job)
        assert time.monotonic() < deadline, f"job stayed {job['status']}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.sandbox
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_one_apply_and_destroy_in_metrics_logs_and_traces(observed: tuple[Any, io.StringIO]) -> None:
    from fastapi.testclient import TestClient

    from vmplane.api.app import create_app
    from vmplane.jobs import tokens
    from vmplane.observe import logs
    from vmplane.settings import get_settings
    from vmplane.store.db import transaction

    exporter, stream = observed
    settings = get_settings()
    settings.ensure_home()
    with transaction(settings.db_url) as s:
        api_token, _ = tokens.create_token(s, "acme", tokens.Role.admin)
    auth = {"Authorization": f"Bearer {api_token}"}
    doc = load_spec(EXAMPLES / "fixed.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["name"] = "obs-flow"
    doc["runtime"] = {"env": {"DB_PASSWORD": RUNTIME_SECRET}, "files": {"/etc/app/key.pem": PRIVATE_KEY}}

    with TestClient(create_app(settings, run_workflows=True)) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers=auth).status_code == 401  # an org's admin token sees no other org
        metrics_auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        # The registry is the process's: other tests in this process counted steps and calls before.
        before = c.get("/metrics", headers=metrics_auth).text
        r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc, headers=auth)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        assert _wait(c, job_id, auth, "succeeded", "failed")["status"] == "succeeded"
        assert c.delete(f"/provisioning-jobs/{job_id}", headers=auth).status_code == 202
        assert _wait(c, job_id, auth, "deleted", "delete_failed")["status"] == "deleted"
        # Whatever the code logs is redacted, even a line that names the secrets outright.
        logs.get("vmplane.test").warning("planted: %s %s %s", api_token, RUNTIME_SECRET, PLANTED["AWS_SESSION_TOKEN"])
        scraped = c.get("/metrics", headers=metrics_auth)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    _check_metrics(before, scraped.text, job_id)
    _check_logs(stream.getvalue(), job_id, [api_token, METRICS_TOKEN, RUNTIME_SECRET, *PLANTED.values()])
    _check_traces(exporter.get_finished_spans(), job_id)


def _sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if m and all(f'{k}="{v}"' in m.group(1).split(",") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def _check_metrics(before: str, text: str, job_id: str) -> None:
    def added(name: str, **labels: str) -> float:
        return _sample(text, name, **labels) - _sample(before, name, **labels)

    # Gauges read this test's own store; counters and histograms are the process's, so their increase counts.
    assert _sample(text, "vmplane_jobs", status="deleted") == 1
    assert _sample(text, "vmplane_jobs", status="running") == 0
    for step in PROVISION:
        assert added("vmplane_step_duration_seconds_count", step=step, phase="provision", outcome="succeeded") == 1
    assert added("vmplane_step_duration_seconds_count", step="stepDeleteNetwork", phase="teardown") == 1
    ok = dict(cloud="aws", service="ec2", outcome="ok")
    assert added("vmplane_cloud_api_calls_total", operation="CreateVpc", **ok) == 1
    assert added("vmplane_cloud_api_calls_total", operation="DeleteVpc", **ok) == 1
    assert re.search(r"^vmplane_queue_depth 0\.0$", text, re.M)
    # No org, environment or job id in any label.
    assert "acme" not in text and "obs-flow" not in text and job_id not in text


def _check_logs(text: str, job_id: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text
    assert "MIIEplanted" not in text and "[redacted]" in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d["time"]) for d in lines)
    assert all({"level", "job", "step", "org", "message"} <= d.keys() for d in lines)
    mine = [d for d in lines if d["job"] == job_id]
    assert all(d["org"] == "acme" and d["cloud"] == "aws" for d in mine)
    said = {(d["step"], d["message"]) for d in mine}
    for phase, status in (("provision", "succeeded"), ("teardown", "deleted")):
        assert (None, f"job {job_id}: {phase} started") in said
        assert (None, f"job {job_id}: {phase} ended {status}") in said
    for step in [*PROVISION, "stepDeleteNetwork", "stepUnregisterSpace"]:
        assert (step, f"{step} started") in said
        assert any(s == step and re.fullmatch(rf"{step} succeeded in \d+\.\d\ds", m) for s, m in said)
    # The step log's own lines, in the step's scope.
    assert any(s == "stepRegisterSpace" and "registered acme/obs-flow" in m for s, m in said)


def _check_traces(spans: tuple[ReadableSpan, ...], job_id: str) -> None:
    jobs = {s.attributes["vmplane.phase"]: s for s in spans if s.name == "vmplane.job"}
    assert set(jobs) == {"provision", "teardown"}
    job = jobs["provision"]
    assert job.attributes["vmplane.job"] == job_id and job.attributes["cloud"] == "aws"
    trace_id = job.context.trace_id
    steps = [s for s in spans if s.parent is not None and s.parent.span_id == job.context.span_id]
    assert sorted(s.name for s in steps) == sorted(PROVISION)
    by_id = {s.context.span_id: s for s in steps}
    calls = [s for s in spans if s.parent is not None and s.parent.span_id in by_id]
    assert all(s.context.trace_id == trace_id for s in [*steps, *calls])
    network = [s for s in calls if by_id[s.parent.span_id].name == "stepCreateNetwork"]  # type: ignore[union-attr]
    assert "ec2.CreateVpc" in {s.name for s in network}
    assert all(s.attributes["vmplane.outcome"] in ("ok", "failed") for s in calls)
    assert {by_id[s.parent.span_id].name for s in calls} >= set(PROVISION) - {"stepRegisterSpace"}  # type: ignore[union-attr]
