"""`vmplane rotate` on Proxmox: replace a Fixed pool's VMs cloned from an outdated config, one at a time.

Names are stable (`<env>-<pool>-<i>`) and vmplane finds a VM by its name, so the replacement cannot run
beside the old VM: the old one is destroyed (with its ISO), then the same name is cloned from the current
config, started and waited for (running, then the sentinel) before the next VM goes. The pool is one VM
short meanwhile; there is no load balancer to drain on Proxmox.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.proxmox import vms
from vmplane.clouds.proxmox.compute import Placement, ensure_vm
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.readiness import wait_bootstrapped, wait_running
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMRecord, VMState

NEW = "new"  # ReplacementID's second phase: the old VM is gone


def rotate_pool(pve: Pve, ctx: Context, pool_name: str) -> list[str]:
    version = ctx.infra.LaunchTemplateVersion.get(pool_name)
    todo = ctx.infra.vms_to_rotate(pool_name)
    if not todo:
        return [f"{pool_name}: every VM runs config v{version}"]
    placement = Placement(pve, ctx, pool_name)
    for rec in todo:
        rotate_vm(pve, ctx, rec, placement)
    return [f"{pool_name}: replaced {len(todo)} VMs one at a time ({', '.join(v.Name for v in todo)})"]


def rotate_vm(pve: Pve, ctx: Context, rec: VMRecord, placement: Placement) -> None:
    """`ReplacementID` is the intent, in two phases saved before each: `<old vmid>@v<N>` (destroy the old VM,
    again if a re-run finds it), then `new@v<N>` (the old one is gone: find or clone the name). The phases
    matter because `cluster/nextid` may hand the old VMID to the replacement."""
    ids = pve_ids(ctx.infra)
    version = ctx.infra.LaunchTemplateVersion[rec.Pool]
    if rec.ReplacementID is None:
        rec.ReplacementID = f"{rec.ID}@v{version}"
        ctx.save()
    old = rec.ReplacementID.partition("@")[0]
    if old != NEW:
        node = ids.Vmids.get(old) or rec.AZ
        if old.isdigit() and node:
            vms.destroy(pve, node, old, rec.Name)
            vms.delete_isos_named(pve, {vms.iso_volume(ctx, int(old))})
            vms.assert_isos_gone(pve, {vms.iso_volume(ctx, int(old))})  # before the record of it goes
        ids.Vmids = {k: v for k, v in ids.Vmids.items() if k != old}
        ids.Isos = {k: v for k, v in ids.Isos.items() if k != rec.Name}
        rec.ID, rec.LaunchTemplateVersion, rec.State = None, None, VMState.pending
        rec.ReplacementID = f"{NEW}@v{version}"
        ctx.save()
    ensure_vm(pve, ctx, rec.Pool, rec.Index, vms.cluster_vms(pve), placement)
    wait_running(pve, ctx, [rec])
    wait_bootstrapped(pve, ctx, [rec])
    if rec.State is not VMState.ready:
        raise DeadlineExceededError(f"replacement {rec.Name} did not become ready")
    rec.ReplacementID = None
    ctx.save()
    ctx.log(f"{rec.Name}: replaced by VM {rec.ID} from config v{rec.LaunchTemplateVersion}")
