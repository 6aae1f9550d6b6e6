"""GcpSecretAccess and the per-secret bindings against an in-test Secret Manager (the discovery client's
call chain, with etags and states): the calls sent (versions.get, never access), the messages naming
field, reference and project, and the policy edits (one accessor binding per secret, removal, a
re-run after a crash, others' members kept). The sandbox's own Secret Manager is exercised by
tests/integration/test_gcp_secrets.py."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from tests.helpers import EXAMPLES
from tests.unit.support import variant

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import AuthError, ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp import secret_iam
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.secrets import ACCESSOR, GcpSecretAccess
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import parse_ref
from vmplane.state import InfraConfig

PROJECT = "vmplane-sandbox"
EMAIL = f"vm-sa@{PROJECT}.iam.gserviceaccount.com"
ME = f"serviceAccount:{EMAIL}"
ALICE = "user:alice@example.com"


class _Req:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.execute = fn


class FakeSecretManager:
    """store: secret name -> {"versions": {n: state}, "policy": {...}}; `calls` records (verb, resource)."""

    def __init__(self) -> None:
        self.store: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.denied: set[str] = set()
        self.no_grant: set[str] = set()  # secrets whose policy the caller may not set
        self.conflicts = 0  # the next N setIamPolicy calls meet a concurrent writer
        self.crash_after_sets: int | None = None  # raise after this many successful setIamPolicy calls
        self._etags = itertools.count(1)

    def plant(self, name: str, *states: str, project: str = PROJECT) -> str:
        full = f"projects/{project}/secrets/{name}"
        versions = {str(i + 1): s for i, s in enumerate(states)}
        self.store[full] = {"versions": versions, "policy": {"etag": f"e{next(self._etags)}", "bindings": []}}
        return full

    def _secret(self, name: str) -> dict[str, Any]:
        if name in self.denied:
            raise AuthError("Permission denied", code="PERMISSION_DENIED")
        if name not in self.store:
            raise NotFoundError(f"Secret [{name}] not found", code="NOT_FOUND")
        return self.store[name]

    # the discovery chain: .projects().secrets().versions().get(name=...).execute()
    def projects(self) -> FakeSecretManager:
        return self

    def secrets(self) -> FakeSecretManager:
        return self

    def versions(self) -> FakeSecretManager:
        return self

    def get(self, name: str) -> _Req:
        return _Req(lambda: self._get(name))

    def _get(self, name: str) -> dict[str, Any]:
        if "/versions/" not in name:
            self.calls.append(("secrets.get", name))
            self._secret(name)
            return {"name": name}
        secret_name, _, version = name.partition("/versions/")
        self.calls.append(("versions.get", name))
        versions = self._secret(secret_name)["versions"]
        if version == "latest":  # Google's alias of the most recently created version, whatever its state
            if not versions:
                raise NotFoundError(f"Secret [{secret_name}] not found or has no versions.", code="NOT_FOUND")
            version = str(max(int(n) for n in versions))
        if version not in versions:
            raise NotFoundError(f"{name} not found", code="NOT_FOUND")
        return {"name": f"{secret_name}/versions/{version}", "state": versions[version]}

    def testIamPermissions(self, resource: str, body: dict[str, Any]) -> _Req:
        def run() -> dict[str, Any]:
            self.calls.append(("testIamPermissions", resource))
            self._secret(resource)
            held = [p for p in body["permissions"] if resource not in self.no_grant]
            return {"permissions": held} if held else {}

        return _Req(run)

    def getIamPolicy(self, resource: str, options_requestedPolicyVersion: int) -> _Req:
        def run() -> dict[str, Any]:
            self.calls.append(("getIamPolicy", resource))
            return copy.deepcopy(self._secret(resource)["policy"])

        return _Req(run)

    def setIamPolicy(self, resource: str, body: dict[str, Any]) -> _Req:
        def run() -> dict[str, Any]:
            self.calls.append(("setIamPolicy", resource))
            secret = self._secret(resource)
            if self.conflicts:
                self.conflicts -= 1
                secret["policy"]["etag"] = f"e{next(self._etags)}"  # someone else wrote it
            if body["policy"].get("etag") != secret["policy"]["etag"]:
                raise ConflictError("etag mismatch", code="ABORTED")
            secret["policy"] = {**copy.deepcopy(body["policy"]), "etag": f"e{next(self._etags)}"}
            if self.crash_after_sets is not None:
                self.crash_after_sets -= 1
                if self.crash_after_sets == 0:
                    raise KeyboardInterrupt("killed after a setIamPolicy")
            return copy.deepcopy(secret["policy"])

        return _Req(run)

    def accessors(self, name: str) -> list[str]:
        policy = self.store[name]["policy"]
        return sorted(m for b in policy["bindings"] if b["role"] == ACCESSOR for m in b["members"])


@pytest.fixture
def sm(monkeypatch: pytest.MonkeyPatch) -> tuple[GcpClients, FakeSecretManager]:
    fake = FakeSecretManager()
    gcp = GcpClients(GcpTarget(project=PROJECT, region="us-central1", endpoint_url="http://127.0.0.1:1"))
    monkeypatch.setattr(gcp, "api", lambda name, version: fake)
    return gcp, fake


def with_refs(env: dict[str, str], files: dict[str, str] | None = None) -> EnvSpec:
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    runtime = {
        "env": {k: {"secret": v} for k, v in env.items()},
        "files": {k: {"secret": v} for k, v in (files or {}).items()},
    }
    return variant(spec, runtime=runtime)


def context(spec: EnvSpec) -> Context:
    ctx = Context(job_id="job-secrets-1", spec=spec, infra=InfraConfig(), tagger=Tagger.for_spec(spec, "job-secrets-1"))
    gcp_ids(ctx.infra).ServiceAccountEmail = EMAIL  # as ensure_identity records it
    return ctx


def refs(**fields: str) -> dict[str, Any]:
    return {f"runtime.env.{k}": parse_ref(v) for k, v in fields.items()}


def test_problems_name_the_field_the_reference_and_the_project(sm: tuple[GcpClients, FakeSecretManager]) -> None:
    gcp, fake = sm
    fake.plant("db-password", "ENABLED")
    fake.plant("old", "ENABLED", "DESTROYED")
    fake.plant("empty")
    fake.plant("pinned", "ENABLED", "DISABLED")
    fake.plant("api-key", "ENABLED", project="other-project")
    found = GcpSecretAccess(gcp).problems(
        refs(
            DB="gcp-sm:db-password",
            MISSING="gcp-sm:nope",
            OLD="gcp-sm:old",
            EMPTY="gcp-sm:empty",
            P2="gcp-sm:pinned/versions/2",
            P9="gcp-sm:pinned/versions/9",
            OTHER="gcp-sm:projects/other-project/secrets/api-key",
        )
    )
    assert found == [
        f"runtime.env.MISSING: gcp-sm:nope: no such secret in project {PROJECT}",
        "runtime.env.OLD: gcp-sm:old: version 2 of secret old is DESTROYED: the VM cannot read it; "
        "enable it or pin another",
        f"runtime.env.EMPTY: gcp-sm:empty: secret empty has no version in project {PROJECT}; add one (versions add)",
        "runtime.env.P2: gcp-sm:pinned/versions/2: version 2 of secret pinned is DISABLED: the VM cannot read it; "
        "enable it or pin another",
        f"runtime.env.P9: gcp-sm:pinned/versions/9: secret pinned has no version 9 in project {PROJECT}",
    ]
    # Metadata only: no `access` of a payload, and the other project's secret was asked in its project.
    assert {verb for verb, _ in fake.calls} == {"versions.get", "secrets.get", "testIamPermissions"}
    assert ("versions.get", "projects/other-project/secrets/api-key/versions/latest") in fake.calls


def test_a_denied_read_names_the_permission_and_one_lookup_serves_every_field(
    sm: tuple[GcpClients, FakeSecretManager],
) -> None:
    gcp, fake = sm
    fake.denied.add(fake.plant("locked", "ENABLED"))
    (problem,) = GcpSecretAccess(gcp).problems(refs(A="gcp-sm:locked")) or [""]
    assert problem.startswith("runtime.env.A: gcp-sm:locked: permission denied")
    assert "secretmanager.versions.get on projects/vmplane-sandbox/secrets/locked" in problem
    fake.plant("shared", "ENABLED")
    fake.calls.clear()
    assert GcpSecretAccess(gcp).problems(refs(A="gcp-sm:shared", B="gcp-sm:shared")) == []
    assert [verb for verb, _ in fake.calls] == ["versions.get", "testIamPermissions"]
    fake.no_grant.add(fake.plant("readonly", "ENABLED"))  # readable, but vmplane could not bind the VMs
    (problem,) = GcpSecretAccess(gcp).problems(refs(R="gcp-sm:readonly")) or [""]
    assert problem.startswith("runtime.env.R: gcp-sm:readonly: the credentials cannot grant")
    assert "secretmanager.secrets.setIamPolicy on projects/vmplane-sandbox/secrets/readonly" in problem


def test_versions_resolve_latest_to_the_newest_number(sm: tuple[GcpClients, FakeSecretManager]) -> None:
    gcp, fake = sm
    fake.plant("rotated", "DISABLED", "ENABLED", "ENABLED")
    got = GcpSecretAccess(gcp).versions(refs(A="gcp-sm:rotated", B="gcp-sm:rotated/versions/1"))
    assert got == {"gcp-sm:rotated": "3", "gcp-sm:rotated/versions/1": "1"}
    fake.store[f"projects/{PROJECT}/secrets/rotated"]["versions"]["4"] = "ENABLED"  # a new version added
    assert GcpSecretAccess(gcp).versions(refs(A="gcp-sm:rotated"))["gcp-sm:rotated"] == "4"


def test_guest_source_points_the_vm_at_the_sandbox_or_at_google() -> None:
    sandbox = GcpSecretAccess(GcpClients(GcpTarget(PROJECT, "us-central1", endpoint_url="http://127.0.0.1:9")))
    real = GcpSecretAccess(GcpClients(GcpTarget("my-project", "us-central1")))
    assert sandbox.guest_source() == {
        "cloud": "gcp",
        "project": PROJECT,
        "endpoints": {"metadata": "http://metadata.google.internal", "secretmanager": "http://127.0.0.1:9"},
    }
    assert real.guest_source()["endpoints"]["secretmanager"] == "https://secretmanager.googleapis.com"
    assert real.guest_source()["project"] == "my-project"


def test_one_accessor_binding_per_referenced_secret_and_removal(sm: tuple[GcpClients, FakeSecretManager]) -> None:
    gcp, fake = sm
    db, key, other = fake.plant("db", "ENABLED"), fake.plant("key", "ENABLED"), fake.plant("unused", "ENABLED")
    fake.store[db]["policy"]["bindings"] = [{"role": ACCESSOR, "members": [ALICE]}]
    ctx = context(with_refs({"DB": "gcp-sm:db", "DB2": "gcp-sm:db"}, {"/etc/app/key.pem": "gcp-sm:key/versions/1"}))
    fake.conflicts = 1  # a concurrent writer once: re-read and retried
    secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    assert fake.accessors(db) == sorted([ALICE, ME]) and fake.accessors(key) == [ME]
    assert fake.accessors(other) == []
    assert [b["role"] for b in fake.store[db]["policy"]["bindings"]] == [ACCESSOR]  # no second binding
    assert gcp_ids(ctx.infra).SecretBindings == [db, key]

    fake.calls.clear()
    secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)  # converged: reads only
    assert [verb for verb, _ in fake.calls] == ["getIamPolicy", "getIamPolicy"]

    ctx.spec = with_refs({"DB": "gcp-sm:db"})  # the file's key.pem reference went
    secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    assert fake.accessors(key) == [] and fake.accessors(db) == sorted([ALICE, ME])
    assert gcp_ids(ctx.infra).SecretBindings == [db]

    assert secret_iam.leftovers(gcp, ctx) != []
    secret_iam.delete_secret_bindings(gcp, ctx, EMAIL)
    assert fake.accessors(db) == [ALICE]  # only our member went; the secret and Alice's access stay
    assert set(fake.store) == {db, key, other}
    assert secret_iam.leftovers(gcp, ctx) == []
    del fake.store[db]  # a secret gone at destroy is done
    secret_iam.delete_secret_bindings(gcp, ctx, EMAIL)


def test_killed_between_two_set_iam_policy_calls_a_rerun_ends_as_a_clean_run(
    sm: tuple[GcpClients, FakeSecretManager],
) -> None:
    gcp, fake = sm
    a, b, c = (fake.plant(n, "ENABLED") for n in ("a", "b", "c"))
    ctx = context(with_refs({"A": "gcp-sm:a", "B": "gcp-sm:b"}))
    secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    ctx.spec = with_refs({"B": "gcp-sm:b", "C": "gcp-sm:c"})  # A goes, C comes
    fake.crash_after_sets = 1  # killed right after C's grant, before A's removal
    with pytest.raises(KeyboardInterrupt):
        secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    assert a in gcp_ids(ctx.infra).SecretBindings  # the record still names what is left to remove
    fake.crash_after_sets = None
    secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    assert (fake.accessors(a), fake.accessors(b), fake.accessors(c)) == ([], [ME], [ME])
    assert gcp_ids(ctx.infra).SecretBindings == [b, c]


def test_a_secret_deleted_after_the_check_fails_the_grant_naming_the_field(
    sm: tuple[GcpClients, FakeSecretManager],
) -> None:
    gcp, fake = sm
    ctx = context(with_refs({"DB": "gcp-sm:gone"}))
    with pytest.raises(InvalidRequestError, match=f"runtime.env.DB: gcp-sm:gone: no such secret in project {PROJECT}"):
        secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)
    fake.denied.add(fake.plant("locked", "ENABLED"))
    ctx = context(with_refs({"K": "gcp-sm:locked"}))
    with pytest.raises(AuthError, match=r"runtime\.env\.K: .*secretmanager\.secrets\.setIamPolicy"):
        secret_iam.ensure_secret_bindings(gcp, ctx, EMAIL)


def test_the_plan_lists_one_member_per_secret_and_teardown_removes_what_was_bound() -> None:
    from vmplane.clouds.gcp import plan as gcp_plan
    from vmplane.clouds.gcp import resources

    spec = with_refs(
        {"DB": "gcp-sm:db", "DB2": "gcp-sm:db/versions/2"}, {"/etc/k": "gcp-sm:projects/project-two/secrets/k"}
    )
    lines = [r for r in gcp_plan.provision_resources(spec, InfraConfig(), PROJECT) if "secret" in r.type]
    assert [(r.type, r.name, r.step) for r in lines] == [
        (gcp_plan.SECRET_MEMBER, f"projects/project-two/secrets/k/{ACCESSOR}", "stepCreateIAM"),
        (gcp_plan.SECRET_MEMBER, f"projects/{PROJECT}/secrets/db/{ACCESSOR}", "stepCreateIAM"),
    ]
    assert 'runtime.files["/etc/k"]' in lines[0].detail and "runtime.env.DB" in lines[1].detail
    assert gcp_plan.SECRET_MEMBER in resources.TABLE.direct_types() & resources.TABLE.stack_types()
    infra = InfraConfig()
    ids = gcp_ids(infra)
    ids.Project, ids.ServiceAccountEmail, ids.SecretBindings = PROJECT, EMAIL, [f"projects/{PROJECT}/secrets/db"]
    gone = [r for r in gcp_plan.teardown_resources(infra) if r.type == gcp_plan.SECRET_MEMBER]
    assert [(r.name, r.step) for r in gone] == [(f"projects/{PROJECT}/secrets/db/{ACCESSOR}", "stepDeleteIAM")]
