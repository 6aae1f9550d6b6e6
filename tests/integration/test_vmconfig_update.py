"""A changed vmconfig manifest on the direct pipeline (AWS sandbox): applied with manifest A, the cache's
current one becomes B, `plan` shows a `vm` change `vmconfig.nginx.amd64`, the update makes a new launch
template version and flags the VMs outdated; stepValidate's log says what a real VM would lack."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.deps import cache
from vmplane.deps.manifest import Manifest
from vmplane.envspec.models import Arch, BootstrapMode


def manifest(why: str) -> Manifest:
    return Manifest(
        kind=BootstrapMode.nginx,
        arch=Arch.amd64,
        generatedAt=datetime(2026, 12, 1, tzinfo=UTC),
        unavailable={"*": why},
    )


@pytest.mark.sandbox
@pytest.mark.slow
def test_manifest_change_is_a_vm_change_and_update_flags_vms_outdated(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    a = manifest("manifest A: nothing reachable")
    cache.save(cli.home, a)
    env_file = write_env(tmp_path, "itest-vmconfig")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    try:
        assert job["status"] == "succeeded", job["error"]
        assert job["config"]["vmconfig"] == {"web": {"file": a.filename, "digest": a.digest()}}
        validate = next(s for s in job["steps"] if s["name"] == "stepValidate")
        assert any(
            line.startswith("sandbox: a real VM would fail closed here: pools.web.image: " + a.filename)
            and "manifest A: nothing reachable" in line
            for line in validate["log"]
        ), validate["log"]
        before = {v["Name"]: v["ID"] for v in job["config"]["infra"]["VMs"]}
        assert cli.json("plan", "-f", str(env_file), "--sandbox")["decision"] == "no_changes"

        b = manifest("manifest B: still nothing")
        cache.save(cli.home, b)
        plan = cli.json("plan", "-f", str(env_file), "--sandbox")
        assert plan["decision"] == "update"
        assert [(c["path"], c["impact"], c["old"], c["new"]) for c in plan["changes"]] == [
            ("vmconfig.nginx.amd64", "vm", a.digest()[:12], b.digest()[:12])
        ]
        assert "new launch template version" in plan["changes"][0]["consequence"]
        assert any(n.startswith("sandbox: a real VM would fail closed here") for n in plan["notes"])

        updated = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert updated["status"] == "succeeded", updated["error"]
        assert updated["config"]["operation"]["kind"] == "update"
        assert updated["config"]["vmconfig"]["web"]["digest"] == b.digest()
        assert updated["config"]["infra"]["LaunchTemplateVersion"]["web"] == 2
        envs = cli.json("envs")["environments"]
        assert next(e for e in envs if e["name"] == "itest-vmconfig")["outputs"]["outdatedVms"] == sorted(before)
        assert cli.json("plan", "-f", str(env_file), "--sandbox")["decision"] == "no_changes"
    finally:
        assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
