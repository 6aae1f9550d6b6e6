"""Stop and start a pool's VMs (vmplane stop/start).

Stop asks each guest to shut down (ACPI, through PVE's `status/shutdown` with `forceStop`: PVE stops the
VM itself at the timeout); disks are kept. The pool joins `StoppedPools` before anything is stopped, so a
crash or an apply in between keeps it stopped. Start starts each VM, waits for it to run and for the
sentinel (which survives the reboot on the disk) through the agent, then the pool leaves `StoppedPools`.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.proxmox import vms
from vmplane.clouds.proxmox.readiness import wait_bootstrapped, wait_running
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMRecord, VMState

SHUTDOWN_TIMEOUT = 120  # seconds the guest gets to power off before PVE stops it


def pool_vms(ctx: Context, pool_name: str) -> list[VMRecord]:
    return [v for v in ctx.infra.VMs if v.Pool == pool_name and v.ID and v.AZ and v.Index >= 0]


def stop_pool(pve: Pve, ctx: Context, pool_name: str) -> None:
    infra = ctx.infra
    if pool_name not in infra.StoppedPools:
        infra.StoppedPools = [*infra.StoppedPools, pool_name]
        ctx.save()
    recs = pool_vms(ctx, pool_name)
    for rec in recs:
        node, vmid = str(rec.AZ), str(rec.ID)
        now = vms.status(pve, node, vmid)
        if now is None:
            continue  # gone: `vmplane apply` recreates it (stopped, as its pool is)
        if now != "stopped":
            # PVE's own `timeout` parameter: run_task's would shadow it, so the task is waited for here.
            upid = pve.post(f"nodes/{node}/qemu/{vmid}/status/shutdown", timeout=SHUTDOWN_TIMEOUT, forceStop=1)
            if isinstance(upid, str) and upid.startswith("UPID:"):
                pve.wait_task(node, upid, timeout=SHUTDOWN_TIMEOUT + 60, what=f"shutdown of {rec.Name}")
        rec.State = VMState.stopped
        ctx.save()
    ctx.log(f"pool {pool_name}: {len(recs)} VMs stopped (disks kept)")


def start_pool(pve: Pve, ctx: Context, pool_name: str) -> None:
    infra = ctx.infra
    recs = pool_vms(ctx, pool_name)
    for rec in recs:
        node, vmid = str(rec.AZ), str(rec.ID)
        now = vms.status(pve, node, vmid)
        if now is None:
            raise InvalidRequestError(f"VM {rec.Name} ({vmid}) is gone: run `vmplane apply` to recreate it")
        if now == "stopped":
            pve.run_task("POST", f"nodes/{node}/qemu/{vmid}/status/start", node=node, what=f"start of {rec.Name}")
            rec.State = VMState.pending
        elif rec.State is not VMState.ready:
            rec.State = VMState.bootstrap  # running already (started by hand): the sentinel decides
        ctx.save()
    wait_running(pve, ctx, recs)
    wait_bootstrapped(pve, ctx, recs)
    infra.StoppedPools = [p for p in infra.StoppedPools if p != pool_name]
    ctx.save()
    ctx.log(f"pool {pool_name}: {len(recs)} VMs started and ready")
