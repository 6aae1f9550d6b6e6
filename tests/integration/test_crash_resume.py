"""Crash safety: SIGKILL a real `vmplane` process right after a cloud create returns and before the
step's checkpoint, then resume. The job must continue at the interrupted step and create no duplicate.

The process is paused at the exact point by `VMPLANE_FAULT_PAUSE_AFTER=<Operation>` (clouds/aws/session.py:
after that API call succeeds it writes a marker file and sleeps), so the kill is deterministic.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources


def kill_after(cli: Cli, operation: str, *args: str) -> None:
    marker = cli.home / "fault-paused"
    marker.unlink(missing_ok=True)
    proc = cli.popen(*args, extra_env={"VMPLANE_FAULT_PAUSE_AFTER": operation})
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


# One kill per step that creates things, at its non-idempotent-by-name creates.
CASES = [
    ("CreateVpc", "stepCreateNetwork", "apply"),
    ("CreateNatGateway", "stepCreateNetwork", "resume"),
    ("CreateRole", "stepCreateIAM", "apply"),
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
