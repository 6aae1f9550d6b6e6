"""One lifecycle per cloud under the CI fault profile (tests/fixtures/faults/ci.jsonc): examples/web.jsonc
on AWS and examples/gcp-web.jsonc on GCP apply and destroy cleanly, and the sandbox's tally shows that
each fault the profile can inject on that path was injected (so the test fails if faults were off).

Old sandbox: no faults (and no `--faults`); under the profile the old drivers failed on AWS at
CreateSubnet (InvalidVpcID.NotFound right after CreateVpc), at CreateAutoScalingGroup (an instance
profile not yet visible), and on GCP reading a new firewall rule back (404 right after its insert).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, write_env

pytestmark = pytest.mark.slow


def lifecycle(tmp_path: Path, sb: Sandbox, name: str, example: str) -> Counter[str]:
    cli = Cli(home=tmp_path / "home", sandbox_port=sb.port, gcp_port=sb.gcp_port)
    before = sb.fault_tally()
    env = write_env(tmp_path, name, example=example)
    applied = cli.json("apply", "-f", str(env), "--sandbox", "-y", timeout=600)
    assert applied["status"] == "succeeded", applied
    destroyed = cli.json("destroy", "-f", str(env), "--sandbox", "-y", timeout=600)
    assert destroyed["status"] == "deleted", destroyed
    return sb.fault_tally() - before


def test_aws_web_lifecycle_under_faults(tmp_path: Path, faulty_sandbox: Sandbox) -> None:
    injected = lifecycle(tmp_path, faulty_sandbox, "faults-web", "web.jsonc")
    # Capacity reaches RunInstances only (an ASG launches inside moto): test_faults_capacity.py.
    for fault in ("aws.throttle", "aws.visibility", "aws.iamPropagation"):
        assert injected[fault] > 0, f"{fault} never injected: {dict(injected)}"


def test_gcp_web_lifecycle_under_faults(tmp_path: Path, faulty_sandbox: Sandbox) -> None:
    injected = lifecycle(tmp_path, faulty_sandbox, "faults-gcp-web", "gcp-web.jsonc")
    # GCP has no IAM-propagation fault, and capacity reaches instances.insert only (a MIG creates its
    # instances inside the sandbox): test_faults_capacity.py.
    for fault in ("gcp.throttle", "gcp.visibility"):
        assert injected[fault] > 0, f"{fault} never injected: {dict(injected)}"


def test_status_shows_the_profile_and_another_profile_is_refused(tmp_path: Path, faulty_sandbox: Sandbox) -> None:
    """`vmplane sandbox status` names the profile in use; `start --faults` with another one is refused with
    the fix (old CLI: no `--faults` option at all, exit 2)."""
    from tests.conftest import FAULT_PROFILE

    cli = Cli(home=faulty_sandbox.home, sandbox_port=faulty_sandbox.port, gcp_port=faulty_sandbox.gcp_port)
    status = cli.json("sandbox", "status")
    assert status["running"] and status["faults"]["file"] == str(FAULT_PROFILE.resolve())
    assert status["faults"]["seed"] == 25 and "throttle" in status["faults"]
    same = cli.run("sandbox", "start", "--faults", str(FAULT_PROFILE))
    assert same.returncode == 0, same.stderr
    other = tmp_path / "other.jsonc"
    other.write_text('{"seed": 26, "throttle": {"rate": 0.5}}')
    refused = cli.run("sandbox", "start", "--faults", str(other))
    assert refused.returncode == 1
    assert "already running with fault profile" in refused.stderr and "vmplane sandbox stop" in refused.stderr
