"""Rotation of a Google Secret Manager secret on the GCP sandbox: a secret planted in the sandbox's Secret
Manager, examples/gcp-fixed.jsonc applied with a reference to it, a version added, then delivered by
`vmplane apply` of the unchanged file and by `vmplane push ENV`: the same instances, a runtime push in the
job's operations. The sandbox's guest runs nothing (its mailbox agent is simulated), so the test reads the
script each VM's exec mailbox last held and checks it is what vmplane renders for the new version, holding
references only (running such a script against a store is tests/integration/test_secret_rotation.py's)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from google.cloud import compute_v1
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_gcp_secrets import plant

from vmplane.bootstrap.runtime import render_push_script
from vmplane.clouds.gcp.exec import MAILBOX_KEY
from vmplane.clouds.registry import driver_for
from vmplane.envspec.load import load_spec
from vmplane.envspec.secrets import secret_refs
from vmplane.target import Target

PUSH = ["stepPushRuntime", "stepRegisterSpace"]


def mailbox_script(sandbox: Sandbox, project: str, vm: dict[str, Any]) -> str:
    """The script in the VM's exec mailbox (instance metadata `vmplane-exec`, base64 in its JSON)."""
    inst = sandbox.gcp_compute(compute_v1.InstancesClient).get(project=project, zone=vm["AZ"], instance=vm["ID"])
    (value,) = [i.value for i in inst.metadata.items if i.key == MAILBOX_KEY]
    return base64.b64decode(json.loads(value)["script"]).decode()


@pytest.mark.sandbox
def test_a_new_secret_version_reaches_the_vms_by_apply_and_by_push_without_replacement(
    cli: Cli, sandbox: Sandbox, tmp_path: Any
) -> None:
    tag = uuid.uuid4().hex[:8]
    name = f"gtest-rot-{tag}"
    env_file = write_env(tmp_path, name, example="gcp-fixed.jsonc")
    project = load_spec(env_file).provider.project  # type: ignore[union-attr]
    secret = plant(sandbox, project, f"rot-{tag}", f"gcp-rot-one-{tag}")
    runtime = {"env": {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": f"gcp-sm:rot-{tag}"}}}
    env_file = write_env(tmp_path, name, example="gcp-fixed.jsonc", runtime=runtime)
    spec = load_spec(env_file)
    access = driver_for(Target.for_spec(spec, sandbox.gcp_endpoint)).secret_access()

    def sent() -> str:
        versions = access.versions(secret_refs(spec))
        return render_push_script(spec, source=access.guest_source(), versions=versions).strip()

    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    vms = job["config"]["infra"]["VMs"]
    ids = {v["Name"]: v["ID"] for v in vms}
    assert job["config"]["infra"]["SecretVersions"] == {f"gcp-sm:rot-{tag}": "1"}
    first = sent()
    assert f"gcp-rot-one-{tag}" not in first
    assert all(mailbox_script(sandbox, project, v).strip() == first for v in vms)

    sm = sandbox.gcp_discovery("secretmanager").projects().secrets()
    data = base64.b64encode(f"gcp-rot-two-{tag}".encode()).decode()
    sm.addVersion(parent=secret, body={"payload": {"data": data}}).execute()
    plan = cli.json("plan", "-f", str(env_file), "--sandbox")
    assert plan["steps"] == PUSH
    assert [(c["path"], c["old"], c["new"]) for c in plan["changes"]] == [
        ("runtime.env.DB_PASSWORD.secret", "version 1", "new version 2")
    ]
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert applied["status"] == "succeeded", applied["error"]
    op = applied["config"]["operation"]
    assert op["kind"] == "update" and [s["name"] for s in op["steps"]] == PUSH
    assert {v["Name"]: v["ID"] for v in applied["config"]["infra"]["VMs"]} == ids  # nothing replaced
    second = sent()
    assert second != first and all(mailbox_script(sandbox, project, v).strip() == second for v in vms)

    data = base64.b64encode(f"gcp-rot-three-{tag}".encode()).decode()
    sm.addVersion(parent=secret, body={"payload": {"data": data}}).execute()
    pushed = cli.json("push", name, "--yes", timeout=300)
    assert pushed["status"] == "succeeded", pushed["error"]
    op = pushed["config"]["operation"]
    assert op["kind"] == "push" and [s["name"] for s in op["steps"]] == PUSH
    assert {v["Name"]: v["ID"] for v in pushed["config"]["infra"]["VMs"]} == ids
    assert pushed["config"]["infra"]["SecretVersions"] == {f"gcp-sm:rot-{tag}": "3"}
    third = sent()
    assert all(mailbox_script(sandbox, project, v).strip() == third for v in vms)
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes", timeout=300)["status"] == "deleted"
