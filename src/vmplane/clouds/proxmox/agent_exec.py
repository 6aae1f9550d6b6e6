"""The exec channel on Proxmox: the QEMU guest agent through the API (`agent/exec`, `exec-status`,
`file-read`), gated by PVE permissions, with no network path to the VM.

A script runs as `/bin/bash -c <script>` (PVE 9 takes `command` as an array, so the script is one argv
element, never split or re-quoted), then `exec-status` is polled until the process exited. PVE cannot kill
a guest process through the API: a script still running at the deadline is reported `timed_out` and goes
on in the guest. Who may exec is PVE's permission `VM.GuestAgent.Unrestricted` on the VM (the token
`vmplane proxmox init-node` makes); a stopped VM or an agent that does not answer is `undeliverable`.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from vmplane.clouds.base import CommandResult, CommandStatus, SessionHint
from vmplane.clouds.errors import CloudError, InvalidRequestError, UnsupportedError
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.proxmox.capabilities import EXEC_SCRIPT_BYTES
from vmplane.clouds.proxmox.readiness import agent_down
from vmplane.clouds.proxmox.session import Pve

# The script is one argv element of one form field: vmplane keeps AWS's 48 KiB so every channel takes
# the same payloads (Linux allows 128 KiB per argument).
MAX_SCRIPT_BYTES = EXEC_SCRIPT_BYTES
SHELL = ("/bin/bash", "-c")
POLL_FIRST, POLL_FACTOR, POLL_CAP = 0.1, 1.5, 5.0


def script_of(commands: list[str]) -> str:
    """The commands as one bash script, one per line: the exit status is the last command's."""
    script = "\n".join(commands) + "\n"
    size = len(script.encode())
    if size > MAX_SCRIPT_BYTES:
        raise InvalidRequestError(f"script is {size} bytes, over the exec channel's {MAX_SCRIPT_BYTES}")
    return script


def locate(pve: Pve) -> dict[str, dict[str, Any]]:
    """VMID -> its `cluster/resources` entry (node, status): one listing for every VM of a call."""
    return {str(r["vmid"]): r for r in pve.get("cluster/resources", type="vm") or [] if "vmid" in r}


def result_of(vmid: str, status: dict[str, Any]) -> CommandResult:
    code = int(status.get("exitcode", -1))
    out, err = str(status.get("out-data") or ""), str(status.get("err-data") or "")
    if status.get("out-truncated") or status.get("err-truncated"):
        err += "\n(vmplane: the guest agent truncated the output)\n"
    if status.get("signal") is not None and "exitcode" not in status:
        return CommandResult(vmid, CommandStatus.failed, -1, out, err + f"killed by signal {status['signal']}\n")
    return CommandResult(vmid, CommandStatus.success if code == 0 else CommandStatus.failed, code, out, err)


def run_one(pve: Pve, where: dict[str, Any] | None, vmid: str, script: str, timeout: float) -> CommandResult:
    if where is None:
        return CommandResult(vmid, CommandStatus.undeliverable, -1, "", f"no VM {vmid} on the cluster")
    if where.get("status") != "running":
        return CommandResult(vmid, CommandStatus.undeliverable, -1, "", f"VM {vmid} is {where.get('status')}")
    path = f"nodes/{where['node']}/qemu/{vmid}/agent"
    deadline = time.monotonic() + timeout
    try:
        pid = int(pve.post(f"{path}/exec", command=[*SHELL, script])["pid"])
        delay = POLL_FIRST
        while True:
            status = pve.get(f"{path}/exec-status", pid=pid) or {}
            if status.get("exited") in (1, True, "1"):
                return result_of(vmid, status)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = (
                    f"still running in the guest after {timeout:.0f}s (pid {pid}; PVE cannot stop it through the API)"
                )
                return CommandResult(vmid, CommandStatus.timed_out, -1, "", late)
            time.sleep(min(delay, remaining))
            delay = min(delay * POLL_FACTOR, POLL_CAP)
    except CloudError as err:
        if agent_down(err):
            return CommandResult(
                vmid, CommandStatus.undeliverable, -1, "", f"the QEMU guest agent of VM {vmid} is not running"
            )
        raise


def run(pve: Pve, instance_ids: list[str], commands: list[str], *, timeout: float) -> list[CommandResult]:
    """The script on every VM side by side; one result per VM, in order."""
    script = script_of(commands)
    where = locate(pve)
    calls = [partial(run_one, pve, where.get(str(v)), str(v), script, timeout) for v in instance_ids]
    return list(side_by_side(*calls))


def session_hint(pve: Pve, vm_id: str) -> SessionHint:
    """There is no interactive session through the PVE API that vmplane could hand over: say what to use."""
    node = str((locate(pve).get(str(vm_id)) or {}).get("node") or "<node>")
    raise UnsupportedError(
        f"Proxmox VE has no interactive session through its API for vmplane to open on VM {vm_id}: use the web "
        f"UI's console (Datacenter > {node} > {vm_id} > Console), or `qm terminal {vm_id}` as root on {node} (the "
        "template's serial console), or run commands with `vmplane exec` (the QEMU guest agent)",
        code="Unsupported",
    )
