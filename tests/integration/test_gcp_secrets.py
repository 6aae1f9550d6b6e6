"""Secrets by reference on the GCP sandbox's Secret Manager v1: the VMs' service account gets exactly one
`roles/secretmanager.secretAccessor` binding per referenced secret, on the secret (each secret's IAM
policy and the project's read back with google-api-python-client, not vmplane's code), none on an
unreferenced secret and nothing new at project level; a reference removed takes its binding with it;
destroy leaves no binding and every secret as it was; `vmplane plan --sandbox` of a file with a missing
secret exits 2 at the field, before any job exists."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_gcp_identity_preflight import clients, context, gcp_spec, project_policy, roles_of

from vmplane.clouds.gcp import identity, inventory, naming, secret_iam
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec

ACCESSOR = "roles/secretmanager.secretAccessor"
ALICE = "user:alice@example.com"


def plant(sandbox: Sandbox, project: str, secret_id: str, value: str = "s3cr3t-planted") -> str:
    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    sm.create(parent=f"projects/{project}", secretId=secret_id, body={"replication": {"automatic": {}}}).execute()
    name = f"projects/{project}/secrets/{secret_id}"
    sm.addVersion(parent=name, body={"payload": {"data": base64.b64encode(value.encode()).decode()}}).execute()
    return name


def secret_policy(sandbox: Sandbox, name: str) -> dict[str, Any]:
    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    return dict(sm.getIamPolicy(resource=name).execute())


def access_as(sandbox: Sandbox, email: str, secret: str) -> tuple[int, str]:
    """The latest version's payload as service account `email` reads it (HTTP status, value)."""
    import urllib.error
    import urllib.request

    url = f"{sandbox.gcp_endpoint}/v1/{secret}/versions/latest:access"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer sandbox-sa:{email}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, base64.b64decode(json.loads(r.read())["payload"]["data"]).decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def accessor_bindings(policy: dict[str, Any], member: str) -> list[dict[str, Any]]:
    return [b for b in policy.get("bindings", []) if member in b.get("members", [])]


def with_refs(spec: EnvSpec, env: dict[str, str], files: dict[str, str] | None = None) -> EnvSpec:
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["runtime"] = {
        **data.get("runtime", {}),
        "env": {k: {"secret": v} for k, v in env.items()},
        "files": {k: {"secret": v} for k, v in (files or {}).items()},
    }
    return EnvSpec.model_validate(data)


def test_one_accessor_binding_per_referenced_secret_removed_with_the_reference_and_at_destroy(
    sandbox: Sandbox,
) -> None:
    project = f"sec-{uuid.uuid4().hex[:10]}"
    db, key, unused = (plant(sandbox, project, n) for n in ("db-password", "tls-key", "unreferenced"))
    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    theirs = secret_policy(sandbox, db)  # someone else's reader on one of ours: it must survive
    theirs["bindings"] = [{"role": ACCESSOR, "members": [ALICE]}]
    sm.setIamPolicy(resource=db, body={"policy": theirs}).execute()

    spec = with_refs(gcp_spec(project), {"DB_PASSWORD": "gcp-sm:db-password"}, {"/etc/app/tls.key": "gcp-sm:tls-key"})
    gcp, ctx = clients(sandbox, spec), context(spec)
    project_before = project_policy(sandbox, project)
    identity.ensure_identity(gcp, ctx)
    email = naming.service_account_email(spec, project)
    member = f"serviceAccount:{email}"

    for name in (db, key):
        (binding,) = accessor_bindings(secret_policy(sandbox, name), member)
        assert binding["role"] == ACCESSOR and not binding.get("condition")
    assert accessor_bindings(secret_policy(sandbox, unused), member) == []
    assert ALICE in accessor_bindings(secret_policy(sandbox, db), ALICE)[0]["members"]
    project_after = project_policy(sandbox, project)
    assert roles_of(project_after, member) == sorted(identity.ROLES)  # nothing about secrets at project level
    assert not [b for b in project_after.get("bindings", []) if b["role"].startswith("roles/secretmanager.")]
    assert [b for b in project_before.get("bindings", []) if member not in b.get("members", [])] == [
        b for b in project_after.get("bindings", []) if member not in b.get("members", [])
    ]
    assert gcp_ids(ctx.infra).SecretBindings == sorted([db, key])

    ctx.spec = with_refs(gcp_spec(project), {"DB_PASSWORD": "gcp-sm:db-password"})  # tls.key's reference went
    identity.ensure_identity(gcp, ctx)
    assert accessor_bindings(secret_policy(sandbox, key), member) == []
    assert len(accessor_bindings(secret_policy(sandbox, db), member)) == 1
    assert gcp_ids(ctx.infra).SecretBindings == [db]
    assert [lo.kind for lo in inventory.leftovers(gcp, ctx) if lo.kind == secret_iam.LEFTOVER_KIND] == [
        secret_iam.LEFTOVER_KIND
    ]

    identity.delete_identity(gcp, ctx)
    for name in (db, key, unused):
        assert email not in json.dumps(secret_policy(sandbox, name))  # neither live nor deleted: form
        versions = sm.versions().get(name=f"{name}/versions/latest").execute()
        assert versions["state"] == "ENABLED"  # the secret is the user's: left as it was
    assert accessor_bindings(secret_policy(sandbox, db), ALICE)
    assert secret_iam.leftovers(gcp, ctx) == []
    sm.delete(name=db).execute()
    identity.delete_identity(gcp, ctx)  # a re-run with a secret gone: done


def test_plan_of_a_file_with_a_missing_secret_exits_2_naming_the_field(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    project = f"sec-{uuid.uuid4().hex[:10]}"
    plant(sandbox, project, "present")
    provider = {"cloud": "gcp", "project": project, "region": "us-central1"}
    runtime = {"env": {"DB_PASSWORD": {"secret": "gcp-sm:absent"}, "API_KEY": {"secret": "gcp-sm:present"}}}
    env = write_env(tmp_path, "gcp-secret-plan", example="gcp-fixed.jsonc", provider=provider, runtime=runtime)
    proc = cli.run("plan", "-f", str(env), "--sandbox", "--output", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"runtime.env.DB_PASSWORD: gcp-sm:absent: no such secret in project {project}" in said, said
    assert "API_KEY" not in said
    assert cli.json("jobs")["jobs"] == []

    runtime["env"]["DB_PASSWORD"] = {"secret": "gcp-sm:present"}
    ok = write_env(tmp_path, "gcp-secret-plan", example="gcp-fixed.jsonc", provider=provider, runtime=runtime)
    plan = cli.json("plan", "-f", str(ok), "--sandbox")
    assert {r["type"] for r in plan["resources"]} >= {"google_service_account"}


def test_checks_and_versions_read_metadata_only_on_the_sandbox(sandbox: Sandbox) -> None:
    from vmplane.clouds.gcp.secrets import GcpSecretAccess
    from vmplane.envspec.secrets import parse_ref

    project = f"sec-{uuid.uuid4().hex[:10]}"
    rotated = plant(sandbox, project, "rotated")
    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    plant(sandbox, project, "stale")
    sm.versions().disable(name=f"projects/{project}/secrets/stale/versions/1", body={}).execute()
    sm.create(parent=f"projects/{project}", secretId="empty", body={"replication": {"automatic": {}}}).execute()
    other = f"sec-{uuid.uuid4().hex[:10]}"
    plant(sandbox, other, "shared")
    access = GcpSecretAccess(clients(sandbox, gcp_spec(project)))
    refs = {
        f"runtime.env.{field}": parse_ref(text)
        for field, text in (
            ("ROTATED", "gcp-sm:rotated"),
            ("PINNED", "gcp-sm:rotated/versions/1"),
            ("NO_V7", "gcp-sm:rotated/versions/7"),
            ("STALE", "gcp-sm:stale"),
            ("EMPTY", "gcp-sm:empty"),
            ("GONE", "gcp-sm:gone"),
            ("OTHER", f"gcp-sm:projects/{other}/secrets/shared"),
        )
    }
    assert access.problems(refs) == [
        f"runtime.env.NO_V7: gcp-sm:rotated/versions/7: secret rotated has no version 7 in project {project}",
        "runtime.env.STALE: gcp-sm:stale: version 1 of secret stale is DISABLED: the VM cannot read it; "
        "enable it or pin another",
        f"runtime.env.EMPTY: gcp-sm:empty: secret empty has no version in project {project}; add one (versions add)",
        f"runtime.env.GONE: gcp-sm:gone: no such secret in project {project}",
    ]
    ok = {k: v for k, v in refs.items() if k in ("runtime.env.ROTATED", "runtime.env.PINNED", "runtime.env.OTHER")}
    assert access.versions(ok) == {
        "gcp-sm:rotated": "1",
        "gcp-sm:rotated/versions/1": "1",
        f"gcp-sm:projects/{other}/secrets/shared": "1",
    }
    sm.addVersion(parent=rotated, body={"payload": {"data": base64.b64encode(b"rotated-value").decode()}}).execute()
    assert access.versions(ok)["gcp-sm:rotated"] == "2" and access.versions(ok)["gcp-sm:rotated/versions/1"] == "1"
    for p in (project, other):  # no payload was ever read by the control plane
        assert sandbox.gcp_control(f"secret-accesses?project={p}", method="GET")["accesses"] == []


def test_apply_binds_and_destroy_unbinds_through_the_cli(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    """The whole path: stepValidate's check, stepCreateIAM's binding, and teardown's removal (its leftovers
    check would fail the destroy if a binding stayed)."""
    project = f"sec-{uuid.uuid4().hex[:10]}"
    db, unused = plant(sandbox, project, "db-password"), plant(sandbox, project, "unreferenced")
    provider = {"cloud": "gcp", "project": project, "region": "us-central1"}
    runtime = {"env": {"DB_PASSWORD": {"secret": "gcp-sm:db-password"}}}
    env = write_env(tmp_path, "gcp-secret-e2e", example="gcp-fixed.jsonc", provider=provider, runtime=runtime)
    applied = cli.json("apply", "-f", str(env), "--sandbox", "--yes", timeout=300)
    assert applied["status"] == "succeeded", applied.get("error")
    email = naming.service_account_email(load_spec(env), project)
    member = f"serviceAccount:{email}"
    (binding,) = accessor_bindings(secret_policy(sandbox, db), member)
    assert binding["role"] == ACCESSOR
    assert accessor_bindings(secret_policy(sandbox, unused), member) == []
    # As the VM: the token its metadata server hands out (the sandbox's `sandbox-sa:EMAIL`) reads the
    # referenced secret, and is refused the other one.
    assert access_as(sandbox, email, db) == (200, "s3cr3t-planted")
    assert access_as(sandbox, email, unused)[0] == 403

    gone = cli.json("destroy", "--job", applied["id"], "--yes", "--sandbox", timeout=300)
    assert gone["status"] == "deleted", gone.get("error")
    assert email not in json.dumps(secret_policy(sandbox, db))
    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    assert sm.versions().get(name=f"{db}/versions/latest").execute()["state"] == "ENABLED"


def test_killed_between_two_set_iam_policy_calls_apply_and_destroy_rerun_to_a_clean_end(
    cli: Cli, sandbox: Sandbox, tmp_path
) -> None:
    from tests.integration.test_crash_resume import kill_after

    project = f"sec-{uuid.uuid4().hex[:10]}"
    a, b = plant(sandbox, project, "alpha"), plant(sandbox, project, "bravo")
    provider = {"cloud": "gcp", "project": project, "region": "us-central1"}
    runtime = {"env": {"A": {"secret": "gcp-sm:alpha"}}, "files": {"/etc/app/b": {"secret": "gcp-sm:bravo"}}}
    env = write_env(tmp_path, "gcp-secret-crash", example="gcp-fixed.jsonc", provider=provider, runtime=runtime)
    member = f"serviceAccount:{naming.service_account_email(load_spec(env), project)}"
    kill_after(cli, "secretmanager.projects.secrets.setIamPolicy#1", "apply", "-f", str(env), "--sandbox", "--yes")
    bound = [len(accessor_bindings(secret_policy(sandbox, s), member)) for s in (a, b)]
    assert bound == [1, 0]  # killed between the two grants

    job = cli.json("apply", "-f", str(env), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job.get("error")
    for s in (a, b):
        (binding,) = accessor_bindings(secret_policy(sandbox, s), member)
        assert binding["members"].count(member) == 1

    kill_after(cli, "secretmanager.projects.secrets.setIamPolicy#1", "destroy", "-f", str(env), "--sandbox", "--yes")
    assert [len(accessor_bindings(secret_policy(sandbox, s), member)) for s in (a, b)] == [0, 1]
    gone = cli.json("destroy", "-f", str(env), "--sandbox", "--yes", timeout=300)
    assert gone["status"] == "deleted", gone.get("error")
    for s in (a, b):
        assert member.split(":", 1)[1] not in json.dumps(secret_policy(sandbox, s))


def test_a_reference_added_then_removed_through_apply_binds_then_unbinds(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    project = f"sec-{uuid.uuid4().hex[:10]}"
    a, b = plant(sandbox, project, "alpha"), plant(sandbox, project, "bravo")
    provider = {"cloud": "gcp", "project": project, "region": "us-central1"}
    name = "gcp-secret-readd"

    def apply(env: dict[str, Any]) -> str:
        path = write_env(tmp_path, name, example="gcp-fixed.jsonc", provider=provider, runtime={"env": env})
        job = cli.json("apply", "-f", str(path), "--sandbox", "--yes", timeout=300)
        assert job["status"] == "succeeded", job.get("error")
        return f"serviceAccount:{naming.service_account_email(load_spec(path), project)}"

    member = apply({"A": {"secret": "gcp-sm:alpha"}})
    try:
        apply({"A": {"secret": "gcp-sm:alpha"}, "B": {"secret": "gcp-sm:bravo"}})  # a reference added
        assert [len(accessor_bindings(secret_policy(sandbox, s), member)) for s in (a, b)] == [1, 1]
        apply({"B": {"secret": "gcp-sm:bravo"}})  # and one removed
        assert [len(accessor_bindings(secret_policy(sandbox, s), member)) for s in (a, b)] == [0, 1]
    finally:
        cli.json("destroy", "-f", str(tmp_path / f"{name}.jsonc"), "--yes", "--sandbox", timeout=300)
