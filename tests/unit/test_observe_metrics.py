"""/metrics: its own registry, protected by VMPLANE_METRICS_TOKEN (absent: no endpoint), the store's
gauges read at scrape time, no org in any label; a worker's --metrics-port."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY as GLOBAL_REGISTRY
from tests.helpers import free_port

from vmplane.api.app import create_app
from vmplane.jobs import tokens
from vmplane.observe import metrics
from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.store.job_records import JobStatus
from vmplane.store.models import JobRow, WorkerRow

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
TOKEN = "metrics-secret-0123456789"
BEAT = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


def _store(tmp_path) -> tuple[Settings, str]:
    settings = Settings(home=tmp_path)
    settings.ensure_home()
    with transaction(settings.db_url) as s:
        admin, _ = tokens.create_token(s, "acme", tokens.Role.admin)
        for i, (org, status) in enumerate([("acme", "running"), ("acme", "succeeded"), ("globex", "succeeded")]):
            s.add(JobRow(id=f"job-{i}", org=org, env_name=f"env-{i}", status=status, version=1, config={}, steps=[]))
        s.add(WorkerRow(executor_id="worker-a", host="h", pid=1, last_seen=BEAT))
    return settings, admin


def test_no_token_configured_means_no_endpoint(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("VMPLANE_METRICS_TOKEN", raising=False)
    settings, admin = _store(tmp_path)
    with TestClient(create_app(settings, run_workflows=False)) as c:
        assert c.get("/metrics").status_code == 404
        assert c.get("/metrics", headers={"Authorization": f"Bearer {admin}"}).status_code == 404
        assert "/metrics" not in c.get("/openapi.json").json()["paths"]


def test_only_the_metrics_token_reads_the_aggregates_of_all_orgs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VMPLANE_METRICS_TOKEN", TOKEN)
    settings, admin = _store(tmp_path)
    with TestClient(create_app(settings, run_workflows=False)) as c:
        r = c.get("/metrics")
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
        assert c.get("/metrics", headers={"Authorization": f"Bearer {admin}"}).status_code == 401  # an org admin
        assert c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
        r = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'vmplane_jobs{status="succeeded"} 2.0' in text and 'vmplane_jobs{status="running"} 1.0' in text
    assert all(f'vmplane_jobs{{status="{s.value}"}}' in text for s in JobStatus)
    (beat,) = [
        ln for ln in text.splitlines() if ln.startswith('vmplane_worker_last_heartbeat_seconds{worker="worker-a"}')
    ]
    assert float(beat.split()[-1]) == BEAT.timestamp()
    assert "vmplane_queue_depth 0.0" in text
    assert "# TYPE vmplane_step_duration_seconds histogram" in text
    assert "# TYPE vmplane_cloud_api_calls_total counter" in text
    for private in ("acme", "globex", "env-0", "job-0"):
        assert private not in text


def test_the_registry_is_not_prometheus_clients_global_one() -> None:
    assert metrics.REGISTRY is not GLOBAL_REGISTRY
    assert GLOBAL_REGISTRY.get_sample_value("vmplane_cloud_api_calls_total") is None


def test_a_worker_serves_the_same_registry_on_its_metrics_port() -> None:
    metrics.observe_step("stepCreateNetwork", "aws", "provision", "succeeded", 0.3)
    port = free_port()
    metrics.serve(port)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    line = (
        "vmplane_step_duration_seconds_count"
        '{cloud="aws",outcome="succeeded",phase="provision",step="stepCreateNetwork"}'
    )
    assert line in text


def test_the_gauges_read_the_store_of_the_last_app_only(tmp_path, monkeypatch) -> None:
    """A process serves one store; an app created later (as tests do in turn) replaces the first one's
    gauges instead of adding a second set of the same families."""
    monkeypatch.setenv("VMPLANE_METRICS_TOKEN", TOKEN)
    _store(tmp_path / "first")  # one running job there
    create_app(Settings(home=tmp_path / "first"), run_workflows=False)
    second = Settings(home=tmp_path / "second")
    second.ensure_home()
    with TestClient(create_app(second, run_workflows=False)) as c:
        text = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    assert [ln for ln in text.splitlines() if ln.startswith('vmplane_jobs{status="running"}')] == [
        'vmplane_jobs{status="running"} 0.0'
    ]
