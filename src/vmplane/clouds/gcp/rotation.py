"""`vmplane rotate`: replace a pool's VMs that run an outdated template version, explicitly.

MIG pools use the group's native rolling update (PROACTIVE, surge one VM per zone, none unavailable).
Fixed pools go one VM at a time, as on AWS; but a GCP instance name is unique per zone and Fixed names
are stable, so the replacement cannot run beside the old VM: the old one is deleted, then the same name
is inserted from the current template. The pool is one VM short while that happens.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.gcp import lb_backend, mig
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import (
    delete_instance,
    get_instance,
    insert_instance,
    record_instance,
    source_template,
    template_version,
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
    for vm in todo:
        rotate_fixed_vm(gcp, ctx, vm)
    return [f"{pool_name}: replaced {len(todo)} VMs one at a time ({', '.join(v.Name for v in todo)})"]


def rotate_fixed_vm(gcp: GcpClients, ctx: Context, rec: VMRecord) -> None:
    """Delete the VM, insert the same name from the current template, wait RUNNING and the sentinel.

    `ReplacementID` (`<name>@v<N>`) is the intent, saved before the delete: a re-run sees it and reads
    the step from the cloud (old VM still there: delete it; none: insert; the new one: wait)."""
    infra = ctx.infra
    version = infra.LaunchTemplateVersion[rec.Pool]
    zone = str(rec.AZ)
    if rec.ReplacementID is None:
        rec.ReplacementID = f"{rec.Name}@v{version}"
        ctx.save()
    live = get_instance(gcp, zone, rec.Name)
    if live is not None:
        record_instance(ctx, rec, live)
        made_from = template_version(ctx.spec, rec.Pool, source_template(live), version)
        if made_from != version:
            delete_instance(gcp, zone, rec.Name)
            live = None
    rec.State = VMState.pending  # the new VM is seen RUNNING and bootstrapped before the next one goes
    ctx.save()
    if live is None:
        insert_instance(gcp, ctx, rec.Pool, rec.Name, zone)
        rec.LaunchTemplateVersion = version
    _rejoin_instance_group(gcp, ctx, zone, rec.Name)
    wait_running(gcp, ctx, [rec])
    wait_bootstrapped(gcp, ctx, [rec])
    if rec.State is not VMState.ready:
        raise DeadlineExceededError(f"replacement {rec.Name} did not become ready")
    rec.ReplacementID = None
    ctx.save()
    ctx.log(f"{rec.Name}: replaced from template v{rec.LaunchTemplateVersion}")


def _rejoin_instance_group(gcp: GcpClients, ctx: Context, zone: str, name: str) -> None:
    """Behind a load balancer a Fixed VM sits in its zone's unmanaged instance group; deleting the VM
    took it out, so the replacement is added back (the group itself is the LB step's). Checked on every
    run, so a crash between the insert and the add still ends with the VM in its group."""
    group = gcp_ids(ctx.infra).InstanceGroups.get(zone)
    if not group:
        return
    me = ref(gcp, f"zones/{zone}/instances/{name}")
    if me not in lb_backend.members(gcp, zone, group):
        lb_backend.add_members(gcp, zone, group, [me])
