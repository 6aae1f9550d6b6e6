"""Bad input: every error with file, line and column, exit 2, and nothing created anywhere."""

from __future__ import annotations

import json
import re

import pytest
from tests.helpers import Cli, Sandbox

BROKEN = """{
  "name": "Bad_Name",
  "org": "acme",
  "provider": { "cloud": "aws", "region": "us-east-1" },
  "network": { "ingressPorts": [80, 22] },
  "pools": {
    "web": { "mode": "fixed", "sise": 2 },
  },
}
"""


@pytest.mark.sandbox
def test_broken_file_reports_all_errors_and_creates_nothing(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    bad = tmp_path / "bad.jsonc"
    bad.write_text(BROKEN)
    vpcs_before = len(sandbox.client("ec2").describe_vpcs()["Vpcs"])

    for cmd in (["validate", "-f", str(bad)], ["apply", "-f", str(bad), "--sandbox", "--yes"]):
        proc = cli.run(*cmd)
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(str(bad))]
        located = [re.match(rf"{re.escape(str(bad))}:(\d+):(\d+): (\S+): (.+)", ln) for ln in lines]
        assert all(located), lines
        by_path = {m.group(3): (int(m.group(1)), int(m.group(2)), m.group(4)) for m in located if m}
        assert by_path["name"][0] == 2
        assert by_path["network.ingressPorts"][0] == 5 and "22" in by_path["network.ingressPorts"][2]
        assert any(p.startswith("pools.web") and "did you mean 'size'" in v[2] for p, v in by_path.items())
        assert len(lines) >= 4  # name, port 22, unknown 'sise', missing 'size'
        assert "nothing was created" in proc.stderr

    assert not (cli.home / "vmplane.db").exists()  # no job was recorded
    assert len(sandbox.client("ec2").describe_vpcs()["Vpcs"]) == vpcs_before


def test_validate_json_and_exit_codes(tmp_path) -> None:
    from tests.helpers import EXAMPLES, Cli

    c = Cli(home=tmp_path / "h", sandbox_port=1)
    assert c.json("validate", "-f", str(EXAMPLES / "fixed.jsonc")) == {
        "file": str(EXAMPLES / "fixed.jsonc"),
        "valid": True,
        "name": "demo-fixed",
        "org": "acme",
    }
    assert c.run("validate", "-f", str(tmp_path / "missing.jsonc")).returncode == 2
    assert c.run("status", "no-such-env").returncode == 2
    assert c.run("apply", "-f", str(EXAMPLES / "fixed.jsonc"), "--output", "yaml").returncode == 2


def test_destroy_without_yes_refuses_when_not_interactive(tmp_path) -> None:
    from tests.helpers import EXAMPLES, Cli

    c = Cli(home=tmp_path / "h", sandbox_port=1)
    # No job exists: nothing to destroy, exit 0 and says so.
    proc = c.run("destroy", "-f", str(EXAMPLES / "fixed.jsonc"), "--output", "json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["status"] == "absent"


def test_plan_prints_plus_lines_and_summary(tmp_path) -> None:
    from tests.helpers import EXAMPLES, Cli

    c = Cli(home=tmp_path / "h", sandbox_port=1)
    proc = c.run("plan", "-f", str(EXAMPLES / "fixed.jsonc"), "--sandbox")
    assert proc.returncode == 0, proc.stderr
    assert "+ aws_vpc.demo-fixed" in proc.stdout
    assert proc.stdout.count("+ aws_instance.") == 2
    assert "Plan: 18 to add, 0 to change, 0 to destroy." in proc.stdout
    plan = c.json("plan", "-f", str(EXAMPLES / "fixed.jsonc"))
    assert plan["decision"] == "new" and len(plan["steps"]) == 7
    assert sum(1 for r in plan["resources"] if r["action"] == "+") == 18
