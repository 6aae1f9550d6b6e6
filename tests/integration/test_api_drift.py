"""`GET /provisioning-jobs/{id}/drift`, the `repair` vmOp of `PATCH` and the `vmplane_drift_resources` gauge,
through the API in this process (so its driver can be substituted) with its workflows running here, on
the sandbox (examples/fixed.jsonc under names of its own).

The AWS driver's `drift` and `repair_drift` answer from a recorded list of `Drift` (tests/recorded_drift.py),
so a test can hold a repair in its step (a job not at rest) and make the cloud unreadable on demand. What
each cloud finds and repairs is tested in the clouds' own tests (test_<cloud>_drift.py), the real AWS
driver through this API in test_api_drift_aws.py. Everything above the driver is real: the API, its job
records, the repair operation's run (stepValidate, stepRepairDrift, then every provisioning step
reconciling on the sandbox) and /metrics."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.helpers import EXAMPLES, Sandbox
from tests.recorded_drift import RecordedDrift, recorded

from vmplane.clouds.errors import UnreachableError
from vmplane.envspec.load import load_spec
from vmplane.settings import Settings

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
]

METRICS_TOKEN = "metrics-token-drift-5b1e0c7a"
DRIFT_KEYS = {"env", "job", "target", "drift"}


@dataclass
class DriftApi:
    c: TestClient
    settings: Settings
    fake: RecordedDrift | None  # None: the real driver reads the sandbox (test_api_drift_aws.py)
    tokens: dict[tuple[str, str], str]

    @property
    def recorded(self) -> RecordedDrift:
        assert self.fake is not None, "this API reads the real driver's drift"
        return self.fake

    def auth(self, role: str = "operator", org: str = "acme") -> dict[str, str]:
        if (org, role) not in self.tokens:
            from vmplane.jobs import tokens
            from vmplane.store.db import transaction

            with transaction(self.settings.db_url) as s:
                self.tokens[org, role], _ = tokens.create_token(s, org, tokens.Role(role))
        return {"Authorization": f"Bearer {self.tokens[org, role]}"}

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.c.get(f"/provisioning-jobs/{job_id}", headers=self.auth("viewer"))
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait(self, job_id: str, *done: str) -> dict[str, Any]:
        deadline = time.monotonic() + 240
        while True:
            job = self.job(job_id)
            if job["status"] in done:
                return job
            assert time.monotonic() < deadline, f"job stayed {job['status']}"
            time.sleep(0.2)

    def drift(self, job_id: str, role: str = "viewer", org: str = "acme") -> Any:
        return self.c.get(f"/provisioning-jobs/{job_id}/drift", headers=self.auth(role, org))

    def repair(self, job_id: str, if_match: str | None = None, role: str = "operator") -> Any:
        headers = {**self.auth(role), **({"If-Match": if_match} if if_match else {})}
        return self.c.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "repair"}, headers=headers)

    def gauge(self) -> dict[tuple[str, str], float]:
        """The gauge's samples: (kind, change) -> value (a label set an earlier check found stays, at 0)."""
        r = self.c.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert r.status_code == 200, r.text
        found = re.findall(r'^vmplane_drift_resources\{change="(\w+)",kind="([\w-]+)"\} (\S+)$', r.text, re.M)
        return {(kind, change): float(value) for change, kind, value in found}

    def provisioned(self, name: str) -> dict[str, Any]:
        """examples/fixed.jsonc applied on the sandbox under `name`, through the API."""
        doc = load_spec(EXAMPLES / "fixed.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
        doc["name"] = name
        r = self.c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc, headers=self.auth())
        assert r.status_code == 201, r.text
        job = self.wait(r.json()["id"], "succeeded", "failed")
        assert job["status"] == "succeeded", job["error"]
        return job


def serve_in_process(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, fake: RecordedDrift | None
) -> Iterator[DriftApi]:
    """The API with its workflows in this process on the sandbox; `fake` substitutes the AWS driver's drift."""
    from vmplane.api.app import create_app
    from vmplane.pipeline import engine
    from vmplane.settings import get_settings

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMPLANE_HOME", str(tmp_path_factory.mktemp("api-drift-home")))
        mp.setenv("VMPLANE_SANDBOX_PORT", str(sandbox.port))
        mp.setenv("VMPLANE_GCP_SANDBOX_PORT", str(sandbox.gcp_port))
        mp.setenv("VMPLANE_METRICS_TOKEN", METRICS_TOKEN)
        get_settings.cache_clear()
        if fake is not None:
            fake.install(mp)
        settings = get_settings()
        settings.ensure_home()
        try:
            with TestClient(create_app(settings, run_workflows=True)) as c:
                yield DriftApi(c, settings, fake, {})
        finally:
            if fake is not None:
                fake.release.set()
            engine.shutdown()
            get_settings.cache_clear()


@pytest.fixture(scope="module")
def api(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DriftApi]:
    yield from serve_in_process(sandbox, tmp_path_factory, RecordedDrift())


def first_vm_and_group(job: dict[str, Any]) -> tuple[str, str, str]:
    infra = job["config"]["infra"]
    vm = infra["VMs"][0]
    return vm["Name"], vm["ID"], infra["VMSecurityGroupID"]


def vm_ids(job: dict[str, Any]) -> list[str]:
    return sorted(v["ID"] for v in job["config"]["infra"]["VMs"])


def test_drift_is_the_clis_json_records_nothing_and_the_gauge_counts_it(api: DriftApi) -> None:
    from vmplane.jobs import drift
    from vmplane.jobs import service as jobs
    from vmplane.store.db import transaction

    job = api.provisioned("api-drift-read")
    job_id = job["id"]
    api.recorded.drift = []
    r = api.drift(job_id)
    assert r.status_code == 200, r.text
    assert r.json() == {"env": "api-drift-read", "job": job_id, "target": r.json()["target"], "drift": []}
    assert "sandbox" in r.json()["target"] and r.headers["ETag"] == f'"{job["version"]}"'

    api.recorded.drift = recorded(*first_vm_and_group(job))
    r = api.drift(job_id)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == DRIFT_KEYS and body["drift"] == [d.to_json() for d in api.recorded.drift]
    # The JSON `vmplane drift -o json` prints: the same check, read here through the same driver.
    with transaction(api.settings.db_url) as s:
        view = jobs.view(jobs.get_row(s, job_id))
    assert drift.check(view).to_json() == body
    assert {k: v for k, v in api.gauge().items() if v} == {
        ("aws_instance", "missing"): 1,
        ("aws_instance", "extra"): 1,
        ("aws_security_group", "changed"): 2,  # vmplane's group and the user's default one
    }
    after = api.job(job_id)  # a read records nothing
    assert (after["version"], after["config"].get("operation")) == (job["version"], job["config"].get("operation"))

    api.recorded.drift = []
    assert api.drift(job_id).json()["drift"] == []
    gauge = api.gauge()
    assert ("aws_instance", "missing") in gauge and set(gauge.values()) == {0}  # what it found before reads 0

    assert api.drift(job_id, org="globex").status_code == 404  # another org's job does not exist
    assert api.drift("job-nosuch").status_code == 404
    assert api.c.get(f"/provisioning-jobs/{job_id}/drift").status_code == 401


def test_repair_records_the_operation_runs_it_and_leaves_only_the_users_drift(api: DriftApi) -> None:
    job = api.provisioned("api-drift-repair")
    job_id, version = job["id"], job["version"]
    api.recorded.drift = recorded(*first_vm_and_group(job))
    reads = len(api.recorded.reads)

    # Refused before anything is read or recorded: a stale If-Match, a viewer.
    assert api.repair(job_id, if_match='"1"').status_code == 412
    assert api.repair(job_id, role="viewer").status_code == 403
    assert len(api.recorded.reads) == reads and api.job(job_id)["version"] == version

    api.recorded.hold = True
    r = api.repair(job_id, if_match=f'"{version}"')
    assert r.status_code == 202, r.text
    body = r.json()
    op = body["operation"]
    assert op["kind"] == "repair" and op["params"] == {"drift": 4}
    assert [s["name"] for s in op["steps"]][:2] == ["stepValidate", "stepRepairDrift"]
    assert [i["path"] for i in body["impact"]] == [d.resource for d in api.recorded.drift if d.repairable]
    assert {i["impact"] for i in body["impact"]} == {"cloud"}

    # In the middle of its repair the job is not at rest: no drift read, no second repair.
    assert api.recorded.entered.wait(120), "stepRepairDrift never ran"
    assert api.drift(job_id).status_code == 409
    assert api.repair(job_id).status_code == 409
    api.recorded.hold = False
    api.recorded.release.set()

    done = api.wait(job_id, "succeeded", "failed")
    assert done["status"] == "succeeded", done["error"]
    ran = done["config"]["operation"]
    assert ran["kind"] == "repair" and ran["status"] == "succeeded"
    assert {s["status"] for s in ran["steps"]} == {"succeeded"}
    assert api.recorded.repairs == [job_id]
    # The provisioning steps reconciled an environment with nothing missing: the same VMs, by id.
    assert vm_ids(done) == vm_ids(job)

    # What is left is the user's (reported only): nothing to repair, and nothing recorded for asking.
    left = api.drift(job_id).json()["drift"]
    assert [(d["resource"], d["repairable"]) for d in left] == [("aws_security_group.default", False)]
    r = api.repair(job_id)
    assert r.status_code == 409 and "nothing to repair" in r.json()["detail"]["message"]
    api.recorded.drift = []
    r = api.repair(job_id)
    assert r.status_code == 409 and "no drift" in r.json()["detail"]["message"]
    assert api.job(job_id)["version"] == done["version"]


def test_an_unreadable_cloud_a_cloud_without_drift_and_a_job_not_at_rest_are_refused(api: DriftApi) -> None:
    from tests.integration.test_refused_before_job import failed_real_job
    from tests.unit.support import variant

    from vmplane.envspec.models import EnvSpec

    job = api.provisioned("api-drift-refused")
    job_id = job["id"]
    api.recorded.error = UnreachableError("connection refused by 127.0.0.1:9", operation="ec2.DescribeInstances")
    try:
        for r in (api.drift(job_id), api.repair(job_id)):
            assert r.status_code == 502, r.text
            assert r.json()["detail"]["message"].startswith("the cloud could not be read; nothing was recorded")
    finally:
        api.recorded.error = None
    assert api.job(job_id)["version"] == job["version"]

    # The Azure stub reads no drift (422), whatever its job's state; recorded as a failed Azure apply is.
    spec: EnvSpec = variant(
        load_spec(EXAMPLES / "fixed.jsonc"),
        name="api-drift-azure",
        provider={"cloud": "azure", "region": "westeurope"},
        exec={"mode": "AzureRunCmd"},
    )
    env_file = api.settings.home / "api-drift-azure.jsonc"
    env_file.write_text(spec.model_dump_json(by_alias=True, exclude_none=True))
    from tests.helpers import Cli

    azure_id = failed_real_job(Cli(home=api.settings.home, sandbox_port=api.settings.sandbox_port), env_file)
    for r in (api.drift(azure_id), api.repair(azure_id)):
        assert r.status_code == 422, r.text
        assert "drift detection: not supported by the azure driver" in r.json()["detail"]["message"]

    # A deleted job's record says nothing the cloud should hold: 409.
    assert api.c.delete(f"/provisioning-jobs/{job_id}", headers=api.auth("admin")).status_code == 202
    assert api.wait(job_id, "deleted", "delete_failed")["status"] == "deleted"
    reads = len(api.recorded.reads)
    for r in (api.drift(job_id), api.repair(job_id)):
        assert r.status_code == 409, r.text
        assert "is deleted: drift is read for a provisioned environment at rest" in r.json()["detail"]["message"]
    assert len(api.recorded.reads) == reads  # refused before the cloud is read
