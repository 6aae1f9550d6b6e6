"""Scale-out on PostgreSQL: a stateless API that only enqueues, `vmplane worker` processes that run the
jobs, and a worker killed with -9 mid-job whose job another worker finishes, with no duplicate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.helpers import Cli, Sandbox, free_port
from tests.integration.test_api import spec_doc, wait
from tests.integration.test_apply_destroy import job_resources
from tests.integration.test_load_balancer import lb_parts

pytestmark = pytest.mark.slow  # whole apply/destroy cycles through the CLI: started before the quick tests


class Cluster:
    def __init__(self, base: Path, sandbox: Sandbox, db_url: str) -> None:
        self.base, self.sandbox, self.db_url = base, sandbox, db_url
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self, name: str, **extra: str) -> dict[str, str]:
        home = self.base / name
        home.mkdir(exist_ok=True)
        cli = Cli(home=home, sandbox_port=self.sandbox.port)
        return {**cli.env, "VMPLANE_DATABASE_URL": self.db_url, **extra}

    def spawn(self, name: str, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        log = (self.base / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vmplane", *args], env=self.env(name, **extra), stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def token(self) -> str:
        cli = Cli(home=self.base / "tokens", sandbox_port=self.sandbox.port)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "vmplane",
                "tokens",
                "create",
                "--org",
                "acme",
                "--role",
                "admin",
                "--output",
                "json",
            ],
            env={**cli.env, "VMPLANE_DATABASE_URL": self.db_url},
            capture_output=True,
            text=True,
            check=True,
        )
        import json

        return str(json.loads(proc.stdout)["token"])


@pytest.fixture
def cluster(tmp_path: Path, sandbox: Sandbox, postgres_url: str) -> Iterator[tuple[Cluster, httpx.Client]]:
    c = Cluster(tmp_path, sandbox, postgres_url)
    (tmp_path / "tokens").mkdir()
    token = c.token()
    port = free_port()
    c.spawn("api", "serve", "--port", str(port), "--no-worker")
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    deadline = time.monotonic() + 60
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, (tmp_path / "api.log").read_text()
        time.sleep(0.2)
    yield c, client
    for p in c.procs:
        if p.poll() is None:
            p.terminate()
    for p in c.procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.mark.sandbox
def test_two_workers_run_the_web_flow(cluster: tuple[Cluster, httpx.Client], sandbox: Sandbox) -> None:
    c, api = cluster
    c.spawn("worker-a", "worker", "--heartbeat", "0.5")
    c.spawn("worker-b", "worker", "--heartbeat", "0.5")
    r = api.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec_doc("pg-web"))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    job = wait(api, job_id, "succeeded", "failed")
    assert job["status"] == "succeeded", job["error"]
    for op in ("detach_lb", "attach_lb"):
        assert api.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": op}).status_code == 202
        job = wait(api, job_id, "succeeded", "failed")
        assert job["status"] == "succeeded" and job["config"]["operation"]["kind"] == op
    assert api.delete(f"/provisioning-jobs/{job_id}").status_code == 202
    assert wait(api, job_id, "deleted", "delete_failed")["status"] == "deleted"
    assert not any(job_resources(sandbox, job_id).values())
    assert not any(lb_parts(sandbox, job_id, "pg-web.sandbox.vmplane.test").values())


@pytest.mark.sandbox
def test_a_killed_worker_s_job_is_finished_by_another(cluster: tuple[Cluster, httpx.Client], sandbox: Sandbox) -> None:
    c, api = cluster
    # Worker A pauses right after RunInstances returns (before the checkpoint) and is killed there.
    a = c.spawn(
        "worker-a", "worker", "--heartbeat", "0.5", "--dead-after", "3", VMPLANE_TEST_HANG_AFTER_CALL="RunInstances"
    )
    r = api.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec_doc("pg-failover", example="fixed.jsonc"))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    marker = c.base / "worker-a" / "fault-paused"
    deadline = time.monotonic() + 90
    while not marker.exists():
        assert a.poll() is None and time.monotonic() < deadline, (c.base / "worker-a.log").read_text()
        time.sleep(0.1)
    c.spawn("worker-b", "worker", "--heartbeat", "0.5", "--dead-after", "3")
    os.kill(a.pid, signal.SIGKILL)
    killed_at = time.monotonic()

    job = wait(api, job_id, "succeeded", "failed", timeout=90)
    took = time.monotonic() - killed_at
    assert job["status"] == "succeeded", job["error"]
    assert took < 60, f"took {took:.0f}s to finish after the kill"
    assert "took over 1 workflow(s) of dead worker" in (c.base / "worker-b.log").read_text()
    found = {k: len(v) for k, v in job_resources(sandbox, job_id).items()}
    assert found["instances"] == 2 and found["vpcs"] == 1 and found["nat"] == 1  # no duplicates
    assert api.delete(f"/provisioning-jobs/{job_id}").status_code == 202
    assert wait(api, job_id, "deleted", "delete_failed")["status"] == "deleted"
