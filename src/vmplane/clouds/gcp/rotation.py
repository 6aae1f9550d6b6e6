"""`vmplane rotate`: replace a pool's VMs that run an outdated template version, explicitly.

MIG pools use the group's native rolling update (PROACTIVE, surge one VM per zone, none unavailable).
Fixed pools go one VM at a time, as on AWS, and never below their size: the replacement is inserted
beside the old VM, seen RUNNING with its bootstrap sentinel, and put in its zone's instance group (behind
the load balancer) before the old VM leaves the group and is deleted. An instance name is unique per
zone, so the replacement takes a name of its own, `<env>-<pool>-<i>-v<N>` (naming.rotated): the VM
record keeps its slot `Name`, its `ID` becomes the new instance's name, and the private IP changes
(nothing reserves it; the load balancer's address is the stable one).
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, DeadlineExceededError
from vmplane.clouds.gcp import lb_backend, mig, naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import (
    delete_instance,
    get_instance,
    insert_instance,
    instance_name,
    record_instance,
    replacement_of,
    wait_running,
)
from vmplane.clouds.gcp.lb_refs import ref
from vmplane.clouds.gcp.readiness import wait_bootstrapped
from vmplane.clouds.gcp.session import GcpClients
from vmplane.envspec.models import AsgPool
from vmplane.state import VMRecord, VMState


def rotate_pool(gcp: GcpClients, ctx: Context, pool_name: str) -> list[str]:
    pool = ctx.spec.pools[pool_name]
    version = ctx.infra.LaunchTemplateVersion.get(pool_name)
    todo = ctx.infra.vms_to_rotate(pool_name)
    if not todo:
        return [f"{pool_name}: every VM runs template v{version}"]
    if isinstance(pool, AsgPool):
        group = ctx.infra.ScalingGroupID[pool_name]
        mig.roll(gcp, ctx, pool_name)
        fresh = [v for v in ctx.infra.VMs if v.Pool == pool_name]
        wait_running(gcp, ctx, fresh)
        wait_bootstrapped(gcp, ctx, fresh)
        return [f"{pool_name}: rolling update of {group} to template v{version} replaced {len(todo)} VMs"]
    swaps = [rotate_fixed_vm(gcp, ctx, vm) for vm in todo]
    return [
        f"{pool_name}: replaced {len(todo)} VMs one at a time, each once its replacement was ready ({', '.join(swaps)})"
    ]


def rotate_fixed_vm(gcp: GcpClients, ctx: Context, rec: VMRecord) -> str:
    """Replace one Fixed VM without the pool going below its size; returns `old -> new`.

    `ReplacementID` (the replacement's instance name) is the intent, saved before the insert. Every
    later step reads the cloud, so a re-run after a kill at any point carries on: the replacement is
    found by its name instead of inserted twice, group membership is checked before each change, and
    the old VM's delete is done once it is gone. A replacement left from a rotation to an older version
    (the template moved on meanwhile) is deleted first: it is neither the old VM nor the wanted one."""
    infra = ctx.infra
    version = infra.LaunchTemplateVersion[rec.Pool]
    zone = str(rec.AZ)
    old = instance_name(rec)
    new = naming.rotated(ctx.spec, rec.Pool, rec.Index, version)
    stale = replacement_of(rec)
    if stale is not None and stale != new:
        _leave_group(gcp, ctx, zone, stale)
        delete_instance(gcp, zone, stale)
    if rec.ReplacementID != new:
        rec.ReplacementID = new
        ctx.save()
    if old != new:
        _bring_up(gcp, ctx, rec, zone, new)
        _join_group(gcp, ctx, zone, new)
        _leave_group(gcp, ctx, zone, old)
        delete_instance(gcp, zone, old)
    live = get_instance(gcp, zone, new)
    if live is None:
        raise DeadlineExceededError(f"replacement {new} for {rec.Name} is gone; run `vmplane rotate` again")
    record_instance(ctx, rec, live)
    rec.LaunchTemplateVersion, rec.State, rec.ReplacementID = version, VMState.ready, None
    ctx.save()
    ctx.log(f"{rec.Name}: {old} -> {new} (template v{version}); the old VM went after {new} was ready")
    return f"{old} -> {new}"


def _bring_up(gcp: GcpClients, ctx: Context, rec: VMRecord, zone: str, name: str) -> None:
    """The replacement inserted (unless a run before this one did) and waited for: RUNNING, then the
    bootstrap sentinel. It is followed on a record of its own, so the slot's record keeps describing the
    serving VM until the swap; a replacement that never gets ready fails the rotation with the old VM
    still in place."""
    live = get_instance(gcp, zone, name)
    if live is None:
        insert_instance(gcp, ctx, rec.Pool, name, zone)
    elif not ownership.owned_by(live, ctx.tagger):
        raise ConflictError(f"instance {name} exists and belongs to {ownership.owner_of(live, ctx.tagger)}")
    probe = VMRecord(Name=name, Pool=rec.Pool, Index=rec.Index, ID=name, AZ=zone)
    wait_running(gcp, ctx, [probe])
    wait_bootstrapped(gcp, ctx, [probe])  # logs the sandbox's simulated sentinel as such
    if probe.State is not VMState.ready:
        raise DeadlineExceededError(f"replacement {name} for {rec.Name} did not become ready")


def _group_of(ctx: Context, zone: str) -> str | None:
    """Behind a load balancer, a Fixed VM serves through its zone's unmanaged instance group (the group
    itself is the LB step's); without one there is no group to keep."""
    return gcp_ids(ctx.infra).InstanceGroups.get(zone) or None


def _join_group(gcp: GcpClients, ctx: Context, zone: str, name: str) -> None:
    group = _group_of(ctx, zone)
    if group is None:
        return
    me = ref(gcp, f"zones/{zone}/instances/{name}")
    if me not in lb_backend.members(gcp, zone, group):
        lb_backend.add_members(gcp, zone, group, [me])


def _leave_group(gcp: GcpClients, ctx: Context, zone: str, name: str) -> None:
    """Out of the backend before the delete, so the backend service drains the VM's connections (a
    deleted member would just vanish)."""
    group = _group_of(ctx, zone)
    if group is None:
        return
    me = ref(gcp, f"zones/{zone}/instances/{name}")
    if me in lb_backend.members(gcp, zone, group):
        lb_backend.remove_members(gcp, zone, group, [me])
