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
