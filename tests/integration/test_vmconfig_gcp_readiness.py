"""GCP: a guest whose bootstrap failed closed reports what it logged (guest attribute
`vmplane/bootstrap-failed`, bootstrap/gcp_guest.py), and the step's timeout error names it."""

from __future__ import annotations

import re

import pytest
from tests.helpers import Sandbox
from tests.integration.test_gcp_compute import ZONES, guest_off, make_env  # noqa: F401  (fixture)

from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.gcp import compute, templates
from vmplane.clouds.gcp.readiness import wait_bootstrapped
from vmplane.state import VMState

WHY = "vmconfig: unpinned: family ubuntu-24.04 (ubuntu 24.04): archive.ubuntu.com timed out"


@pytest.mark.slow  # waits out a readiness deadline
@pytest.mark.usefixtures("guest_off")
def test_timeout_names_what_the_failed_bootstrap_logged(sandbox: Sandbox) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 1}})
    templates.ensure_templates(env.gcp, env.ctx())
    with pytest.raises(DeadlineExceededError):
        compute.ensure_vms(env.gcp, env.ctx())  # the VM exists; nobody played its guest yet
    sandbox.gcp_control(
        "guest-attributes",
        {
            "project": env.project,
            "zone": ZONES[0],
            "instance": "demo-web-0",
            "namespace": "vmplane",
            "key": "bootstrap-failed",
            "value": WHY + "\nFAILED: a pinned artifact is unavailable; sentinel not written",
        },
    )
    env.infra.VMs[0].State = VMState.bootstrap
    with pytest.raises(
        DeadlineExceededError, match=re.escape(f"the bootstrap logged: demo-web-0: {WHY} / FAILED")
    ) as err:
        wait_bootstrapped(env.gcp, env.ctx())
    assert "archive.ubuntu.com timed out" in str(err.value)
    assert env.infra.VMs[0].State is VMState.failed
