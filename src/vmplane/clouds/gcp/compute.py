"""stepCreateVMs and its teardown, over both pool kinds: Fixed pools (`instances`) and ASG pools as
regional MIGs (`mig`); readiness through guest attributes (`readiness`)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.deletes import TEARDOWN_TIMEOUT
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import mig, power
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import (
    delete_instance,
    ensure_fixed_pool,
    instance_name,
    owned_instances,
    region_zones,
    replacement_of,
    wait_running,
)
from vmplane.clouds.gcp.readiness import wait_bootstrapped
from vmplane.clouds.gcp.session import GcpClients
from vmplane.clouds.waits import poll
from vmplane.envspec.models import FixedPool
from vmplane.state import VMState


def ensure_vms(gcp: GcpClients, ctx: Context) -> None:
    missing = [p for p in ctx.spec.pools if p not in ctx.infra.LaunchTemplateID]
    if missing:
        raise InvalidRequestError(
            f"no instance template recorded for pools {', '.join(missing)}: run the template step"
        )
    for pool_name, pool in ctx.spec.pools.items():
        if isinstance(pool, FixedPool):
            ensure_fixed_pool(gcp, ctx, pool_name, pool)
            if pool_name in ctx.infra.StoppedPools:
                power.keep_stopped(gcp, ctx, pool_name)  # a VM added to a stopped pool is stopped too
        else:
            mig.ensure_mig_pool(gcp, ctx, pool_name, pool)  # a stopped pool's group stays at size 0
    wait_running(gcp, ctx)
    wait_bootstrapped(gcp, ctx)


# ---- teardown -------------------------------------------------------------------------------------


def job_instances(gcp: GcpClients, ctx: Context) -> list[tuple[str, str]]:
    """(zone, name) of every instance in the project named with the env's prefix carrying this job's id:
    recorded or not (a crash may leave an unrecorded one), MIG members included."""
    zones = sorted(set(ctx.infra.Zones) | set(region_zones(gcp)))
    return sorted((zone, inst.name) for zone, inst in owned_instances(gcp, ctx, zones))


def delete_vms(gcp: GcpClients, ctx: Context) -> None:
    """Teardown order: autoscalers (nothing scales out while the groups go), each MIG resized to 0 and
    deleted (its VMs with it), then every Fixed VM; then wait until no instance of the job remains."""
    infra, ids = ctx.infra, gcp_ids(ctx.infra)
    groups, scalers = mig.job_migs(gcp, ctx)
    for name in sorted(set(ids.Autoscalers.values()) | set(scalers)):
        mig.delete_autoscaler(gcp, name)
    ids.Autoscalers = {}
    ctx.save()
    for name in sorted(set(infra.ScalingGroupID.values()) | set(groups)):
        mig.delete_mig(gcp, name)
    infra.ScalingGroupID = {}
    ctx.save()

    fixed = [v for v in infra.VMs if v.AZ and v.Index >= 0]
    recorded = {(str(v.AZ), n) for v in fixed for n in (instance_name(v), replacement_of(v)) if n}
    found = job_instances(gcp, ctx)
    targets = sorted(recorded | set(found))
    for zone, name in targets:
        delete_instance(gcp, zone, name)
    for vm in infra.VMs:
        vm.State = VMState.terminated
    ctx.save()

    poll(
        lambda: True if not job_instances(gcp, ctx) else None,
        what="the job's instances to be deleted",
        timeout=TEARDOWN_TIMEOUT,
        first=0.1,
        cap=10,
    )
    infra.VMs = []
    ctx.save()
    ctx.log(f"deleted {len(groups)} managed instance groups and {len(targets)} instances")
