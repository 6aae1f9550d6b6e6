"""Crash safety: SIGKILL a real `vmplane` process right after a cloud create returns and before the
step's checkpoint, then resume. The job must continue at the interrupted step and create no duplicate.

The process is paused at the exact point by the test hook `VMPLANE_TEST_HANG_AFTER_CALL=<Operation>[#N]`
(clouds/aws/session.py: after the first, or Nth, call of that operation returns it writes a marker file
and sleeps), so the kill is deterministic.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources

from vmplane.clouds.faults import FAULT_PAUSE_ENV

pytestmark = pytest.mark.slow  # whole apply/destroy cycles through the CLI: started before the quick tests


def kill_after(cli: Cli, operation: str, *args: str) -> None:
    marker = cli.home / "fault-paused"
    marker.unlink(missing_ok=True)
    proc = cli.popen(*args, extra_env={FAULT_PAUSE_ENV: operation})
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"process ended (exit {proc.returncode}) before {operation}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{operation} was never called")
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def counts(sb: Sandbox, job_id: str) -> dict[str, int]:
    return {k: len(v) for k, v in job_resources(sb, job_id).items()}


# Kills inside a step that creates things, at its non-idempotent-by-name creates, where the crash sweep
# (tests/contract: kill after every mutating call, re-run `apply`, the whole inventory equal to a
# clean run's) does not already cover the same kill with the same way back: `vmplane resume`, and the
# Fixed pool's RunInstances (the sweep's example is an auto-scaling group). Kills after CreateVpc and
# CreateRole followed by a re-run `apply` were cases here too: the sweep covers both, with a stronger check.
CASES = [
    ("CreateNatGateway", "stepCreateNetwork", "resume"),
    ("CreateLaunchTemplate", "stepCreateLaunchTemplate", "resume"),
    ("RunInstances", "stepCreateVMs", "apply"),
]


@pytest.mark.sandbox
@pytest.mark.parametrize(("operation", "step", "how"), CASES, ids=[c[0] for c in CASES])
def test_kill_9_mid_step_then_resume_creates_no_duplicates(
    cli: Cli, sandbox: Sandbox, tmp_path, operation: str, step: str, how: str
) -> None:
    env_file = write_env(tmp_path, f"crash-{operation.lower()}")
    kill_after(cli, operation, "apply", "-f", str(env_file), "--sandbox", "--yes")

    crashed = cli.json("status", "-f", str(env_file))
    assert crashed["status"] == "running"
    by_name = {s["name"]: s["status"] for s in crashed["steps"]}
    assert by_name[step] == "running"  # interrupted inside the step, before its checkpoint

    if how == "apply":
        job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    else:
        job = cli.json("resume", crashed["id"])
    assert job["id"] == crashed["id"]
    assert job["status"] == "succeeded", job["error"]
    assert all(s["status"] == "succeeded" for s in job["steps"])

    found = counts(sandbox, job["id"])
    assert found["vpcs"] == 1
    assert found["nat"] == 1 and found["eips"] == 1 and found["igws"] == 1
    assert found["subnets"] == 4
    assert found["launch_templates"] == 1
    assert found["instances"] == 2
    assert found["roles"] == 1

    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert not any(counts(sandbox, job["id"]).values())


@pytest.mark.sandbox
def test_kill_9_during_teardown_then_resume_finishes_it(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "crash-teardown")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    kill_after(cli, "TerminateInstances", "destroy", "-f", str(env_file), "--sandbox", "--yes")

    mid = cli.json("status", job["id"])
    assert mid["status"] == "deleting"
    done = cli.json("resume", job["id"])
    assert done["status"] == "deleted", done["error"]
    assert not any(counts(sandbox, job["id"]).values())


# `vmplane resume` of the load balancer example. The sweep kills after each of CreateLoadBalancer,
# CreateTargetGroup and CreateListener too (cases here before) and requires the full inventory; resume and a
# re-run apply continue the same workflow, so one LB kill point is enough for the resume path.
LB_CASES = ["RequestCertificate"]


@pytest.mark.sandbox
@pytest.mark.parametrize("operation", LB_CASES)
def test_kill_9_in_the_load_balancer_steps_then_resume(cli: Cli, sandbox: Sandbox, tmp_path, operation: str) -> None:
    from tests.integration.test_load_balancer import lb_parts

    name = f"crash-{operation.lower()[:12]}"
    env_file = write_env(tmp_path, name, example="web.jsonc")
    kill_after(cli, operation, "apply", "-f", str(env_file), "--sandbox", "--yes")
    crashed = cli.json("status", "-f", str(env_file))
    assert crashed["status"] == "running"
    job = cli.json("resume", crashed["id"])
    assert job["status"] == "succeeded", job["error"]
    parts = {k: len(v) for k, v in lb_parts(sandbox, job["id"], f"{name}.sandbox.vmplane.test").items()}
    assert parts == {
        "lbs": 1,
        "target_groups": 1,
        "listeners": 2,
        "certificates": 1,
        "records": 2,
        "lb_security_groups": 1,
    }
    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert not any(lb_parts(sandbox, job["id"], f"{name}.sandbox.vmplane.test").values())


@pytest.mark.sandbox
def test_kill_9_mid_rotation_then_resume_replaces_each_vm_once(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "crash-rotate")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    changed = write_env(tmp_path, "crash-rotate", bootstrap={"mode": "bare"})
    assert cli.json("apply", "-f", str(changed), "--sandbox", "--yes")["status"] == "succeeded"
    kill_after(cli, "RunInstances", "rotate", "crash-rotate", "--yes")  # the first replacement launched

    mid = cli.json("status", job["id"])
    assert mid["status"] == "running" and mid["config"]["operation"]["kind"] == "rotate"
    done = cli.json("resume", job["id"])
    assert done["status"] == "succeeded", done["error"]
    vms = done["config"]["infra"]["VMs"]
    assert all(v["LaunchTemplateVersion"] == 2 and v["ReplacementID"] is None for v in vms)
    live = sorted(i["InstanceId"] for i in job_resources(sandbox, job["id"])["instances"])
    assert live == sorted(v["ID"] for v in vms) and len(live) == 2
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"


@pytest.mark.sandbox
def test_kill_9_mid_detach_then_resume_finishes_it(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    from tests.integration.test_load_balancer import lb_parts

    env_file = write_env(tmp_path, "crash-detach", example="web.jsonc")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    kill_after(cli, "DeleteLoadBalancer", "lb", "detach", "crash-detach", "--yes")
    done = cli.json("resume", job["id"])
    assert done["status"] == "succeeded", done["error"]
    assert done["config"]["operation"]["kind"] == "detach_lb" and done["config"]["operation"]["status"] == "succeeded"
    assert not any(lb_parts(sandbox, job["id"], "crash-detach.sandbox.vmplane.test").values())
    assert len(job_resources(sandbox, job["id"])["instances"]) == 2
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
