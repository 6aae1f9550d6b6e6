"""`vmplane plan` against an applied environment: four edited copies of an example, one per impact
class, each listed under its class with what applying it does; the identity change is refused."""

from __future__ import annotations

import pytest
from tests.helpers import Cli, Sandbox, write_env

EDITS = [
    ("runtime", {"runtime": {"env": {"LOG_LEVEL": "debug"}}}, "runtime.env.LOG_LEVEL", "pushed to the running VMs"),
    (
        "vm",
        {"pools": {"web": {"mode": "fixed", "size": 2, "instanceType": "t3.medium"}}},
        "pools.web.instanceType",
        "new launch template version",
    ),
    ("cloud", {"network": {"ingressPorts": [80, 9090]}}, "network.ingressPorts", "updated in place"),
    ("identity", {"provider": {"cloud": "aws", "region": "eu-west-1"}}, "provider.region", "cannot change in place"),
]


@pytest.mark.sandbox
def test_plan_shows_each_impact_class_for_four_edited_copies(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-impact")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    try:
        for impact, overrides, path, consequence in EDITS:
            (tmp_path / impact).mkdir()
            edited = write_env(tmp_path / impact, "itest-impact", **overrides)
            expect = 2 if impact == "identity" else 0
            plan = cli.json("plan", "-f", str(edited), "--sandbox", expect=expect)
            assert [(c["path"], c["impact"]) for c in plan["changes"]] == [(path, impact)], impact
            assert consequence in plan["changes"][0]["consequence"]
            assert plan["decision"] == ("refused" if impact == "identity" else "update")
            text = cli.run("plan", "-f", str(edited), "--sandbox")
            assert f"{impact}:" in text.stdout and path in text.stdout
        # Planning changed nothing.
        assert cli.json("status", job["id"])["version"] == job["version"]
    finally:
        assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
