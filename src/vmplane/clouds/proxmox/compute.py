"""Fixed pools' VMs: full clones of the template, cloud-init as a NoCloud ISO, started, ready through the agent.

Per VM, in an order a kill at any point resumes from: find (name + ownership), else a VMID from
`cluster/nextid` recorded (intent) before the clone; the ISO recorded, then uploaded; the config (only what
differs), disk grown, firewall on; started; then running and ready for all. VMs are spread over the
target's nodes in order, except that a template on non-shared storage can only be cloned on its own node.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.deletes import TEARDOWN_TIMEOUT
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.proxmox import naming, vms
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.readiness import wait_bootstrapped, wait_running
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.waits import poll
from vmplane.envspec.models import FixedPool
from vmplane.state import VMRecord, VMState

CLONE_ATTEMPTS = 3  # a VMID nextid gave us may be taken by someone else before our clone


def ensure_vms(pve: Pve, ctx: Context) -> None:
    missing = [p for p in ctx.spec.pools if p not in ctx.infra.LaunchTemplateID]
    if missing:
        raise InvalidRequestError(f"no template resolved for pools {', '.join(missing)}: run the template step")
    for pool_name, pool in ctx.spec.pools.items():
        if isinstance(pool, FixedPool):
            ensure_fixed_pool(pve, ctx, pool_name, pool)
    wait_running(pve, ctx)
    wait_bootstrapped(pve, ctx)


def ensure_fixed_pool(pve: Pve, ctx: Context, pool_name: str, pool: FixedPool) -> None:
    listing = vms.cluster_vms(pve)
    placement = Placement(pve, ctx, pool_name)
    for index in range(pool.size):
        ensure_vm(pve, ctx, pool_name, index, listing, placement)
    shrink(pve, ctx, pool_name, pool.size)
    nodes = sorted({str(v.AZ) for v in ctx.infra.VMs if v.Pool == pool_name and v.AZ})
    ctx.log(f"pool {pool_name}: {pool.size} VMs on {', '.join(nodes)}")


class Placement:
    """Which node VM `index` of a pool goes to: the target's nodes round-robin, when the template's disks
    are on shared storage; otherwise the template's node (a clone to another node needs shared storage)."""

    def __init__(self, pve: Pve, ctx: Context, pool_name: str) -> None:
        self.pve, self.ctx, self.pool_name = pve, ctx, pool_name
        ids = pve_ids(ctx.infra)
        self.tnode, self.tvmid = ids.TemplateNode[pool_name], ids.TemplateVmid[pool_name]
        self._shared: bool | None = None

    def node(self, index: int) -> str:
        nodes = self.pve.nodes or (self.tnode,)
        want = nodes[index % len(nodes)]
        if want == self.tnode:
            return want
        if self._shared is None:
            self._shared = vms.template_on_shared_storage(self.pve, self.tnode, self.tvmid)
            if not self._shared:
                self.ctx.log(
                    f"pool {self.pool_name}: template {self.tvmid} is not on shared storage, so its clones stay "
                    f"on {self.tnode} (not spread over {', '.join(nodes)})"
                )
        return want if self._shared else self.tnode


def ensure_vm(
    pve: Pve, ctx: Context, pool_name: str, index: int, listing: list[dict[str, Any]], placement: Placement
) -> None:
    infra, ids = ctx.infra, pve_ids(ctx.infra)
    current = infra.LaunchTemplateVersion[pool_name]
    name = naming.vm_name(ctx.spec, pool_name, index)
    rec = infra.vm(name)
    if rec is None:
        rec = VMRecord(Name=name, Pool=pool_name, Index=index)
        infra.VMs = [*infra.VMs, rec]
    live = vms.find_vm(ctx, listing, name)
    if live is None and rec.ID is not None and vms.by_vmid(listing, rec.ID) is not None:
        ctx.log(f"{name}: VMID {rec.ID} now holds another VM: taking a new one")
        ids.Vmids = {k: v for k, v in ids.Vmids.items() if k != rec.ID}
        rec.ID = None
    if live is None:
        vmid, node = clone_new(pve, ctx, rec, placement.node(index), current)
    else:
        vmid, node = int(live["vmid"]), str(live["node"])
        if live.get("lock"):
            vms.wait_unlocked(pve, node, vmid, name)
        rec.ID, rec.AZ = str(vmid), node
        ids.Vmids = {**ids.Vmids, str(vmid): node}
        if rec.LaunchTemplateVersion is None:
            rec.LaunchTemplateVersion = current  # adopted after a crash before its record was complete
    ctx.save()
    latest = rec.LaunchTemplateVersion == current
    volid = vms.ensure_iso(pve, ctx, rec, vmid, node, current=latest)
    vms.configure(pve, ctx, rec, vmid, node, volid, latest=latest)
    power_state(pve, ctx, rec, vmid, node)


def clone_new(pve: Pve, ctx: Context, rec: VMRecord, node: str, version: int) -> tuple[int, str]:
    """Record the VMID, then clone; a recorded VMID that is still free is used again (a resumed run)."""
    ids = pve_ids(ctx.infra)
    for attempt in range(1, CLONE_ATTEMPTS + 1):
        vmid = int(rec.ID) if rec.ID else int(pve.get("cluster/nextid"))
        rec.ID, rec.AZ, rec.State, rec.LaunchTemplateVersion = str(vmid), node, VMState.pending, version
        ids.Vmids = {**ids.Vmids, str(vmid): node}
        ctx.save()  # intent: teardown finds this VMID even if the clone's answer is lost
        try:
            vms.clone(pve, ctx, rec, vmid, node)
        except ConflictError:
            # Ours, if a retried call's first try made it (its answer lost): adopted, not cloned twice.
            mine = vms.by_vmid(vms.cluster_vms(pve), str(vmid))
            if mine is not None and mine.get("name") == rec.Name:
                vms.wait_unlocked(pve, str(mine["node"]), vmid, rec.Name)
                return vmid, str(mine["node"])
            if attempt == CLONE_ATTEMPTS:
                raise
            ids.Vmids = {k: v for k, v in ids.Vmids.items() if k != str(vmid)}
            rec.ID = None
            continue
        ctx.log(f"{rec.Name}: cloned as VM {vmid} on {node}")
        return vmid, node
    raise AssertionError("unreachable")


def power_state(pve: Pve, ctx: Context, rec: VMRecord, vmid: int, node: str) -> None:
    """Started unless its pool is stopped (`vmplane stop`): then it stays (or is put) stopped."""
    now = vms.status(pve, node, vmid)
    path = f"nodes/{node}/qemu/{vmid}"
    if rec.Pool in ctx.infra.StoppedPools:
        if now == "running":
            pve.run_task("POST", f"{path}/status/stop", node=node, what=f"stop of {rec.Name}")
        rec.State = VMState.stopped
    elif now != "running":
        pve.run_task("POST", f"{path}/status/start", node=node, what=f"start of {rec.Name}")
        rec.State = VMState.pending
    elif rec.State in (VMState.pending, VMState.stopped, VMState.failed):
        rec.State = VMState.bootstrap  # running already: the sentinel decides
    ctx.save()


def shrink(pve: Pve, ctx: Context, pool_name: str, size: int) -> None:
    """A smaller `size` removes the highest-numbered VMs, with their ISOs."""
    ids = pve_ids(ctx.infra)
    for rec in [v for v in ctx.infra.VMs if v.Pool == pool_name and v.Index >= size]:
        if rec.ID and rec.AZ:
            vms.destroy(pve, rec.AZ, rec.ID, rec.Name)
            if volid := ids.Isos.get(rec.Name):
                vms.delete_iso(pve, rec.AZ, volid)
                vms.assert_isos_gone(pve, {volid})  # before its record goes, as in delete_vms
        ids.Vmids = {k: v for k, v in ids.Vmids.items() if k != rec.ID}
        ids.Isos = {k: v for k, v in ids.Isos.items() if k != rec.Name}
        ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != rec.Name]
        ctx.save()
        ctx.log(f"pool {pool_name}: removed {rec.Name} (size is {size})")


# ---- teardown -------------------------------------------------------------------------------------


def delete_vms(pve: Pve, ctx: Context) -> None:
    """Every VM of the job (recorded, or found by tag token / the env's pool), stopped and destroyed with
    purge; then their ISOs; then wait until none of the job's VMs is listed."""
    infra, ids = ctx.infra, pve_ids(ctx.infra)
    # From the cluster, not the record: a recorded VMID is destroyed only while it holds the job's VM.
    targets = {str(r["vmid"]): (str(r["node"]), str(r.get("name") or r["vmid"])) for r in vms.job_vms(pve, ctx)}
    for vmid, (node, name) in sorted(targets.items()):
        vms.destroy(pve, node, vmid, name)
    for vm in infra.VMs:
        vm.State = VMState.terminated
    ctx.save()
    vmids = set(targets) | set(ids.Vmids) | {str(v.ID) for v in infra.VMs if v.ID}
    isos = set(ids.Isos.values()) | {vms.iso_volume(ctx, int(v)) for v in vmids if v.isdigit()}
    removed = vms.delete_isos_named(pve, isos)
    poll(
        lambda: True if not vms.job_vms(pve, ctx) else None,
        what="the job's VMs to be destroyed",
        timeout=TEARDOWN_TIMEOUT,
        first=0.1,
        cap=10,
    )
    # Looked for again before the record of VMIDs and ISOs goes: a delete answered as done (or taken as
    # "already gone") while the volume stays would otherwise leave an ISO no later scan can name. The
    # record is kept, so the leftover scan finds it and a re-run of this step deletes it again.
    vms.assert_isos_gone(pve, isos)
    infra.VMs, ids.Vmids, ids.Isos = [], {}, {}
    ctx.save()
    ctx.log(f"destroyed {len(targets)} VMs and {removed} NoCloud ISOs")
