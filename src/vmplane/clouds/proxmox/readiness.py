"""Running and ready: `status/current` until a started VM runs, then the bootstrap sentinel read through
the QEMU guest agent (`agent/file-read`), the only path to the guest (no network route to it).

While the guest boots, PVE answers 500 "QEMU guest agent is not running"; a missing file is an agent
error too. Both mean "not yet". At the spec's `bootstrap.timeoutSeconds` the late VMs fail, with the last
lines of their bootstrap log (read the same way) in the error.
"""

from __future__ import annotations

import json
import re

from vmplane.bootstrap.vmconfig import BOOTSTRAP_LOG_PATH
from vmplane.clouds.base import Context
from vmplane.clouds.errors import AuthError, CloudError, InvalidRequestError
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.sentinel import NOT_YET, Pace, Seen, wait_sentinels
from vmplane.clouds.sentinel import SIMULATED_NOTE as SIMULATED_NOTE  # what the log says of a simulated sentinel
from vmplane.clouds.waits import poll
from vmplane.envspec.models import SENTINEL_PATH
from vmplane.state import VMRecord, VMState

RUNNING_TIMEOUT = 600.0
AGENT_DOWN = re.compile(r"guest agent is not running|VM \d+ (is )?not running", re.I)
# Each round is one file-read per VM, through pveproxy and the node's agent socket: backed off to 10 s.
PACE = Pace(first=0.2, cap=10.0)
REASON_LINES = 5


def agent_down(err: CloudError) -> bool:
    return bool(AGENT_DOWN.search(str(err)))


def read_file(pve: Pve, node: str, vmid: str, path: str) -> str | None:
    """A guest file's content through the agent; None while the agent cannot answer (down, no such file).
    A refused permission is no "not yet": it raises at once instead of waiting out the bootstrap timeout."""
    try:
        got = pve.get(f"nodes/{node}/qemu/{vmid}/agent/file-read", file=path)
    except AuthError:
        raise
    except CloudError:
        return None
    return str((got or {}).get("content") or "")


def guest_ipv4(pve: Pve, node: str, vmid: str) -> str | None:
    """The guest's first non-loopback IPv4 address as its agent reports it (the SDN's DHCP lease)."""
    try:
        got = pve.get(f"nodes/{node}/qemu/{vmid}/agent/network-get-interfaces")
    except CloudError:
        return None
    for iface in (got or {}).get("result") or []:
        if iface.get("name") == "lo":
            continue
        for addr in iface.get("ip-addresses") or []:
            ip = str(addr.get("ip-address") or "")
            if addr.get("ip-address-type") == "ipv4" and ip and not ip.startswith("127."):
                return ip
    return None


def wait_running(pve: Pve, ctx: Context, recs: list[VMRecord] | None = None) -> None:
    """Every `pending` VM running (then `bootstrap`); a VM that is gone or stops while starting fails."""
    from vmplane.clouds.proxmox.vms import status

    pending = [v for v in (ctx.infra.VMs if recs is None else recs) if v.ID and v.AZ and v.State is VMState.pending]

    def all_running() -> bool | None:
        for rec in list(pending):
            now = status(pve, str(rec.AZ), str(rec.ID))
            if now is None:
                raise InvalidRequestError(f"VM {rec.Name} ({rec.ID}) disappeared while starting")
            if now == "running":
                rec.State = VMState.bootstrap
                pending.remove(rec)
        return True if not pending else None

    if pending:
        try:
            poll(all_running, what="VMs to be running", timeout=RUNNING_TIMEOUT, first=0.05, cap=5)
        finally:
            ctx.save()


def bootstrap_timeout(ctx: Context) -> float:
    return float(ctx.spec.bootstrap.timeout_seconds)


def read_sentinel(pve: Pve, vm: VMRecord) -> Seen:
    """The sentinel file through the agent: ready once non-empty (what SENTINEL_CHECK_COMMAND tests), with
    the guest's address; a JSON sentinel may say `"simulated": true` (an emulator's guest wrote it)."""
    sentinel = (read_file(pve, str(vm.AZ), str(vm.ID), SENTINEL_PATH) or "").strip()
    if not sentinel:
        return NOT_YET
    return Seen(ready=True, simulated=_simulated(sentinel), address=guest_ipv4(pve, str(vm.AZ), str(vm.ID)))


def bootstrap_log(pve: Pve, vm: VMRecord) -> str:
    """The last lines of a late VM's bootstrap log, for the timeout's error."""
    log = read_file(pve, str(vm.AZ), str(vm.ID), BOOTSTRAP_LOG_PATH)
    return "\n".join(log.strip().splitlines()[-REASON_LINES:]) if log else ""


def wait_bootstrapped(pve: Pve, ctx: Context, recs: list[VMRecord] | None = None) -> None:
    """Every `bootstrap` VM `ready` once its sentinel file is non-empty; nothing read, nothing logged when
    no VM is bootstrapping."""
    vms = ctx.infra.VMs if recs is None else recs
    if not any(v.State is VMState.bootstrap for v in vms):
        return
    wait_sentinels(
        ctx,
        vms,
        lambda vm: read_sentinel(pve, vm),
        timeout=bootstrap_timeout(ctx),
        pace=PACE,
        read_through="sentinel read through the QEMU guest agent",
        # The crash hook's guard: fakepve itself, asked once per session (an address alone proves nothing).
        emulator=pve.emulator(),
        last_words=lambda vm: bootstrap_log(pve, vm),
    )


def _simulated(sentinel: str) -> bool:
    try:
        data = json.loads(sentinel)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("simulated") is True
