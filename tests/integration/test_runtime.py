"""Runtime settings on the sandbox: delivered through the exec channel at provisioning and on change,
with no new template version and no replacement. moto records SSM commands without running them, so the
test reads back the exact script each VM was sent."""

from __future__ import annotations

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.bootstrap.runtime import render_push_script
from vmplane.envspec.load import load_spec


def pushed_scripts(sb: Sandbox, instance_id: str) -> list[str]:
    commands = sb.client("ssm").list_commands(InstanceId=instance_id)["Commands"]
    return [c["Parameters"]["commands"][0] for c in commands if "vmplane runtime:" in c["Parameters"]["commands"][0]]


@pytest.mark.sandbox
def test_runtime_change_is_pushed_without_replacing_anything(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-runtime")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    vms = {v["Name"]: v for v in job["config"]["infra"]["VMs"]}
    first = render_push_script(load_spec(env_file))
    for vm in vms.values():
        assert pushed_scripts(sandbox, vm["ID"]) == [first]  # at provisioning, once per VM
        assert vm["RuntimeHash"]

    changed = write_env(
        tmp_path, "itest-runtime", runtime={"env": {"LOG_LEVEL": "debug"}, "files": {"/etc/app.conf": "x=1\n"}}
    )
    plan = cli.json("plan", "-f", str(changed), "--sandbox")
    assert [(c["path"], c["impact"]) for c in plan["changes"]] == [
        ("runtime.env.LOG_LEVEL", "runtime"),
        ('runtime.files["/etc/app.conf"]', "runtime"),
    ]
    assert plan["steps"] == ["stepPushRuntime", "stepRegisterSpace"]
    updated = cli.json("apply", "-f", str(changed), "--sandbox", "--yes")
    assert updated["status"] == "succeeded", updated["error"]
    infra = updated["config"]["infra"]
    assert infra["LaunchTemplateVersion"]["web"] == 1  # no new template version
    second = render_push_script(load_spec(changed))
    for vm in infra["VMs"]:
        assert vm["ID"] == vms[vm["Name"]]["ID"]  # no replacement
        assert pushed_scripts(sandbox, vm["ID"])[-1] == second
        assert vm["RuntimeHash"] != vms[vm["Name"]]["RuntimeHash"]
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
