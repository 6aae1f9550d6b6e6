"""The runtime push with secret references, against a fake store: the wanted hash follows each
reference's current version (a new version makes every VM stale, an unchanged one none), the script gets
the fetcher's source, `env:` values come from the environment (named when missing, remembered as secret),
and `vmplane push`/apply's planners see a new version as a runtime change naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests.bootstrap.test_runtime_push import FakeDriver, _ctx, make_spec

from vmplane.bootstrap.runtime import render_push_script, runtime_hash
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.impact import CONSEQUENCE, Impact
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretRef
from vmplane.jobs import secret_push
from vmplane.jobs import service as svc
from vmplane.observe import redact
from vmplane.pipeline.plan import provision_steps
from vmplane.pipeline.runtime_push import RuntimePushError, env_values, push_runtime, wanted
from vmplane.settings import Settings
from vmplane.state import InfraConfig, VMRecord, VMState
from vmplane.store import db
from vmplane.target import Target

SOURCE = {"cloud": "aws", "region": "us-east-1", "endpoints": {"imds": "http://169.254.169.254"}}


class FakeStore(SecretAccess):
    def __init__(self, versions: dict[str, str | None]) -> None:
        self.now = versions
        self.asked = 0

    def problems(self, refs: Mapping[str, SecretRef]) -> list[str]:
        return []

    def versions(self, refs: Mapping[str, SecretRef]) -> dict[str, str | None]:
        self.asked += 1
        return {r.text: self.now.get(r.text) for r in refs.values()}

    def guest_source(self) -> dict[str, Any]:
        return SOURCE


class StoreDriver(FakeDriver):
    def __init__(self, store: FakeStore) -> None:
        super().__init__()
        self.store = store

    def secret_access(self) -> SecretAccess:
        return self.store


def _pve_spec(env: dict[str, Any]) -> EnvSpec:
    """The same spec on Proxmox VE, the cloud whose secrets are `env:` references."""
    doc = make_spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["provider"] = {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "nodes": ["pve1"]}
    doc["pools"] = {"web": {"mode": "fixed", "size": 2, "template": 9000}}
    doc["exec"] = {"mode": "QemuGuestAgent"}
    doc["runtime"] = {"env": env}
    return EnvSpec.model_validate(doc)


def _secret_spec(**env: Any) -> EnvSpec:
    return make_spec(env={"A": "1", **env})


def test_a_new_version_makes_every_vm_stale_and_the_script_carries_the_source() -> None:
    spec = _secret_spec(DB={"secret": "aws-sm:db-pass"})
    store = FakeStore({"aws-sm:db-pass": "v1"})
    driver = StoreDriver(store)
    ctx = _ctx(spec, [None, None])
    assert push_runtime(driver, ctx, sandbox=False) == 2  # type: ignore[arg-type]
    assert driver.sent == [
        (["i-0", "i-1"], [render_push_script(spec, source=SOURCE, versions={"aws-sm:db-pass": "v1"})])
    ]
    first = runtime_hash(spec, {"aws-sm:db-pass": "v1"})
    assert {v.RuntimeHash for v in ctx.infra.VMs} == {first}
    assert ctx.infra.SecretVersions == {"aws-sm:db-pass": "v1"}
    assert push_runtime(driver, ctx, sandbox=False) == 0  # type: ignore[arg-type]  # same version: nothing
    store.now = {"aws-sm:db-pass": "v2"}  # rotated in the store
    assert push_runtime(driver, ctx, sandbox=False) == 2  # type: ignore[arg-type]
    assert {v.RuntimeHash for v in ctx.infra.VMs} == {runtime_hash(spec, {"aws-sm:db-pass": "v2"})} != {first}
    assert len(driver.sent) == 2


def test_force_pushes_to_every_ready_vm() -> None:
    spec = _secret_spec(DB={"secret": "aws-ssm:/app/db:3"})
    driver = StoreDriver(FakeStore({"aws-ssm:/app/db:3": "3"}))
    want = wanted(driver, spec)  # type: ignore[arg-type]
    ctx = _ctx(spec, [want.hash, want.hash])
    assert push_runtime(driver, ctx, sandbox=False) == 0  # type: ignore[arg-type]
    assert push_runtime(driver, ctx, sandbox=False, force=True) == 2  # type: ignore[arg-type]


def test_a_spec_without_references_never_asks_the_store() -> None:
    spec = make_spec(env={"A": "1"})
    store = FakeStore({})
    ctx = _ctx(spec, [None])
    assert push_runtime(StoreDriver(store), ctx, sandbox=False) == 1  # type: ignore[arg-type]
    assert store.asked == 0


def test_env_values_come_from_the_environment_and_are_remembered_as_secret() -> None:
    spec = _pve_spec({"PW": {"secret": "env:VMPLANE_UNIT_PW"}})
    refs = wanted(StoreDriver(FakeStore({})), spec).env_refs  # type: ignore[arg-type]
    with pytest.raises(RuntimePushError) as err:
        env_values(refs, {})
    assert "runtime.env.PW.secret" in str(err.value) and "VMPLANE_UNIT_PW" in str(err.value)
    value = "unit-env-value-8f3k2"
    assert env_values(refs, {"VMPLANE_UNIT_PW": value}) == {"env:VMPLANE_UNIT_PW": value}
    assert value not in redact.redact(f"x {value} y")


def test_env_references_push_to_every_vm_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _pve_spec({"PW": {"secret": "env:VMPLANE_UNIT_PW2"}})
    monkeypatch.setenv("VMPLANE_UNIT_PW2", "unit-env-value-2-x9")
    driver = StoreDriver(FakeStore({}))
    ctx = _ctx(spec, [None])
    assert push_runtime(driver, ctx, sandbox=False) == 1  # type: ignore[arg-type]
    assert push_runtime(driver, ctx, sandbox=False) == 1  # type: ignore[arg-type]  # no version to compare
    assert driver.sent[-1][1] == [
        render_push_script(
            spec, env_values={"env:VMPLANE_UNIT_PW2": "unit-env-value-2-x9"}, versions={"env:VMPLANE_UNIT_PW2": None}
        )
    ]


def _job(tmp_path: Any, spec: EnvSpec, hashes: list[str | None], got: dict[str, str | None]) -> svc.JobView:
    url = Settings(home=tmp_path).db_url
    vms = [
        VMRecord(Name=f"rt-web-{i}", Pool="web", Index=i, ID=f"i-{i}", State=VMState.ready, RuntimeHash=h)
        for i, h in enumerate(hashes)
    ]
    with db.transaction(url) as s:
        row = svc.create_job(s, spec, Target.for_spec(spec, "http://127.0.0.1:4566"), provision_steps(spec))
        svc.set_status(s, row.id, svc.JobStatus.succeeded)
        svc.save_infra(s, row.id, InfraConfig(VMs=vms, SecretVersions=got))
        return svc.view(svc.get_row(s, row.id))


def test_plans_name_the_field_and_the_new_version(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _secret_spec(DB={"secret": "aws-sm:db-pass"}, PIN={"secret": "aws-ssm:/app/pin:2"})
    store = FakeStore({"aws-sm:db-pass": "v1", "aws-ssm:/app/pin:2": "2"})
    monkeypatch.setattr(secret_push, "driver_for", lambda _t: StoreDriver(store))
    was = runtime_hash(spec, {"aws-sm:db-pass": "v1", "aws-ssm:/app/pin:2": "2"})
    job = _job(tmp_path, spec, [was, was], {"aws-sm:db-pass": "v1", "aws-ssm:/app/pin:2": "2"})
    assert secret_push.version_changes(job, spec) == []  # up to date: no change
    assert "nothing to push" in " ".join(secret_push.plan_push(job).plan.notes)
    store.now = {"aws-sm:db-pass": "v2", "aws-ssm:/app/pin:2": "2"}
    changes = secret_push.version_changes(job, spec)
    assert [(c.path, c.old, c.new, c.impact.value) for c in changes] == [
        ("runtime.env.DB.secret", "version v1", "new version v2", "runtime")
    ]
    op = secret_push.plan_push(job)
    assert op.kind == "push" and op.steps == ["stepPushRuntime", "stepRegisterSpace"]
    assert op.plan.headline == "Push: 2 of 2 running VMs."
    assert "runtime.env.DB.secret: version v1 -> new version v2" in op.plan.notes
    assert secret_push.plan_push(job, force=True).params == {"force": True}


def test_apply_of_the_unchanged_file_pushes_a_new_version(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from vmplane.jobs import operations

    spec = _secret_spec(DB={"secret": "aws-sm:db-pass"})
    store = FakeStore({"aws-sm:db-pass": "v1"})
    monkeypatch.setattr(secret_push, "driver_for", lambda _t: StoreDriver(store))
    was = runtime_hash(spec, {"aws-sm:db-pass": "v1"})
    job = _job(tmp_path, spec, [was, was], {"aws-sm:db-pass": "v1"})
    settings = Settings(home=tmp_path)
    same = operations.plan_apply(settings, spec, job.target, refresh=False)
    assert same.decision is operations.Decision.no_changes  # the VMs have the current version
    store.now = {"aws-sm:db-pass": "v2"}
    ap = operations.plan_apply(settings, spec, job.target, refresh=False)
    assert ap.decision is operations.Decision.update
    assert ap.plan.steps == ["stepPushRuntime", "stepRegisterSpace"]  # runtime impact: pushed, no replacement
    assert [(c["path"], c["new"], c["impact"]) for c in ap.to_json()["changes"]] == [
        ("runtime.env.DB.secret", "new version v2", "runtime")
    ]


def test_the_api_records_a_push_operation(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from vmplane.api.app import JOBS, create_app
    from vmplane.jobs import tokens

    spec = _secret_spec(DB={"secret": "aws-sm:db-pass"})
    store = FakeStore({"aws-sm:db-pass": "v2"})
    monkeypatch.setattr(secret_push, "driver_for", lambda _t: StoreDriver(store))
    job = _job(tmp_path, spec, [runtime_hash(spec, {"aws-sm:db-pass": "v1"}), None], {"aws-sm:db-pass": "v1"})
    settings = Settings(home=tmp_path)
    with db.transaction(settings.db_url) as s:
        token, _ = tokens.create_token(s, spec.org, tokens.Role.operator)
    client = TestClient(create_app(settings, run_workflows=False))  # recorded, never run
    r = client.patch(
        f"{JOBS}/{job.id}", json={"vmOp": "push", "force": True}, headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 202, r.text
    op = r.json()["operation"]
    assert (op["kind"], op["params"]) == ("push", {"force": True})
    assert [s["name"] for s in op["steps"]] == ["stepPushRuntime", "stepRegisterSpace"]
    assert r.json()["impact"] == [{"path": "runtime", "impact": "runtime", "consequence": CONSEQUENCE[Impact.runtime]}]
    doc = client.get("/openapi.json").json()
    assert doc["components"]["schemas"]["Push"]["properties"]["vmOp"]["const"] == "push"


def test_a_reference_added_or_removed_runs_the_identity_step_before_the_push(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vmplane.jobs import operations

    spec = _secret_spec(DB={"secret": "aws-sm:db-pass"})
    store = FakeStore({"aws-sm:db-pass": "v1", "aws-sm:api": "a1"})
    monkeypatch.setattr(secret_push, "driver_for", lambda _t: StoreDriver(store))
    was = runtime_hash(spec, {"aws-sm:db-pass": "v1"})
    job = _job(tmp_path, spec, [was, was], {"aws-sm:db-pass": "v1"})
    regrant = ["stepValidate", "stepCreateIAM", "stepPushRuntime", "stepRegisterSpace"]
    added = _secret_spec(DB={"secret": "aws-sm:db-pass"}, API={"secret": "aws-sm:api"})
    assert operations.plan_update(added, job.target, job, refresh=False).plan.steps == regrant
    assert operations.plan_update(_secret_spec(), job.target, job, refresh=False).plan.steps == regrant  # removed
    plain = _secret_spec(DB={"secret": "aws-sm:db-pass"}, LOG="debug")
    assert operations.plan_update(plain, job.target, job, refresh=False).plan.steps == [
        "stepPushRuntime",
        "stepRegisterSpace",
    ]


def test_an_exec_error_echoing_an_env_value_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from vmplane.clouds.errors import InvalidRequestError

    value = "unit-env-value-echoed-7h2"
    spec = _pve_spec({"PW": {"secret": "env:VMPLANE_UNIT_PW3"}})
    monkeypatch.setenv("VMPLANE_UNIT_PW3", value)

    class Echoing(StoreDriver):
        def run(self, ids: list[str], commands: list[str], timeout: float, comment: str = "") -> Any:
            raise InvalidRequestError(f"parameter verification failed: command: {value} too long")

    with pytest.raises(RuntimePushError) as err:
        push_runtime(Echoing(FakeStore({})), _ctx(spec, [None]), sandbox=False)  # type: ignore[arg-type]
    assert value not in str(err.value) and "parameter verification failed" in str(err.value)
