"""The exec channel over the guest agent on fakepve (nothing runs: the guest player answers)."""

from __future__ import annotations

import pytest
from tests.proxmox.fakecluster import Serving
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import CommandStatus, Context
from vmplane.clouds.errors import InvalidRequestError, UnsupportedError
from vmplane.clouds.proxmox import agent_exec, compute, templates
from vmplane.clouds.proxmox.session import Pve


@pytest.fixture
def vmids(pve: Pve, ctx: Context, guest: GuestPlayer) -> list[str]:
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)
    return [str(v.ID) for v in ctx.infra.VMs]


def test_a_script_runs_through_the_agent_and_its_answer_comes_back(
    cluster: Serving, pve: Pve, vmids: list[str], guest: GuestPlayer
) -> None:
    commands = ["echo hi", "exit 3"]
    guest.answer(agent_exec.script_of(commands), exitcode=3, out="hi\n", err="oops\n")
    results = agent_exec.run(pve, vmids, commands, timeout=10)
    assert [(r.instance_id, r.status, r.exit_code, r.stdout, r.stderr) for r in results] == [
        (v, CommandStatus.failed, 3, "hi\n", "oops\n") for v in vmids
    ]
    ran = cluster.run(lambda: [list(vm.agent_execs.values()) for vm in cluster.pve.vms if not vm.template])
    assert all(argv == [["/bin/bash", "-c", "echo hi\nexit 3\n"]] for argv in ran)  # one argv element, unsplit
    ok = agent_exec.run(pve, vmids[:1], ["true"], timeout=10)
    assert ok[0].ok


def test_a_stopped_vm_or_a_silent_agent_is_undeliverable(pve: Pve, vmids: list[str], guest: GuestPlayer) -> None:
    pve.run_task("POST", f"nodes/pve1/qemu/{vmids[0]}/status/stop", node="pve1", what="stop")
    guest.silence(int(vmids[1]))
    results = agent_exec.run(pve, [*vmids, "999"], ["true"], timeout=5)
    assert [r.status for r in results] == [CommandStatus.undeliverable] * 3
    assert "not running" in results[1].stderr and "no VM 999" in results[2].stderr


def test_too_large_a_script_is_refused_before_any_call(pve: Pve) -> None:
    with pytest.raises(InvalidRequestError, match="over the exec channel"):
        agent_exec.run(pve, ["100"], ["x" * agent_exec.MAX_SCRIPT_BYTES], timeout=5)


def test_no_interactive_session_but_the_hint_says_what_to_use(pve: Pve, vmids: list[str]) -> None:
    with pytest.raises(UnsupportedError, match=f"qm terminal {vmids[0]}` as root on pve1"):
        agent_exec.session_hint(pve, vmids[0])
