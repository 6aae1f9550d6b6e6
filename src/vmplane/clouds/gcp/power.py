"""`vmplane stop` / `vmplane start` on Google Cloud, at once (the schedules act on their own hours).

- Fixed pools: `instances.stop` (the VM goes TERMINATED, GCP's stopped state: disks and addresses kept)
  and `instances.start`, then the guest-attribute readiness check as after a launch.
- Auto-scaled pools (MIGs): the autoscaler is set to mode OFF (neither CPU nor a scaling schedule adds VMs)
  and the group resized to 0; start resizes it to `desired` and turns the autoscaler back ON. Both are the
  spec's own values, so a start restores the pool exactly, whatever the autoscaler had done before.

The pool joins `StoppedPools` before anything is stopped (intent first: a crash or an apply in between
keeps it stopped) and its instance schedule is detached (a scheduled start would undo the stop); start
re-attaches it once the pool runs. Each step re-reads the cloud, so a re-run converges.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import mig, naming, schedules
from vmplane.clouds.gcp.instances import GONE, get_instance, instance_name, wait_running
from vmplane.clouds.gcp.operations import run
from vmplane.clouds.gcp.readiness import wait_bootstrapped
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.waits import poll
from vmplane.envspec.models import AsgPool, FixedPool
from vmplane.state import VMRecord, VMState

SETTLE_TIMEOUT = 600.0  # a VM in STOPPING (or still launching) reaches a state start/stop can act on
MOVING = ("PROVISIONING", "STAGING", "STOPPING", "SUSPENDING", "REPAIRING")


def stop_pool(gcp: GcpClients, ctx: Context, pool_name: str) -> None:
    pool, infra = ctx.spec.pools[pool_name], ctx.infra
    if pool_name not in infra.StoppedPools:
        infra.StoppedPools = [*infra.StoppedPools, pool_name]
        ctx.save()
    if isinstance(pool, FixedPool):
        schedules.ensure_schedules(gcp, ctx)  # detached first: no scheduled start races the stop
        keep_stopped(gcp, ctx, pool_name)
        ctx.log(f"pool {pool_name}: {len(_fixed_vms(ctx, pool_name))} VMs stopped (disks kept)")
        return
    assert isinstance(pool, AsgPool)
    if pool.target_cpu_percent is not None:
        mig.sync_autoscaler(gcp, ctx, pool_name, pool)  # mode OFF before the resize, or it scales back out
    _resize_group(gcp, ctx, pool_name, 0)
    ctx.log(f"pool {pool_name}: managed instance group sized to 0 (autoscaler off)")


def start_pool(gcp: GcpClients, ctx: Context, pool_name: str) -> None:
    pool, infra = ctx.spec.pools[pool_name], ctx.infra
    if isinstance(pool, FixedPool):
        recs = _fixed_vms(ctx, pool_name)
        for rec in recs:
            start_vm(gcp, ctx, rec)
        wait_running(gcp, ctx, recs)
        wait_bootstrapped(gcp, ctx, recs)
        infra.StoppedPools = [p for p in infra.StoppedPools if p != pool_name]
        ctx.save()
        schedules.ensure_schedules(gcp, ctx)  # the pool follows its schedule again
        ctx.log(f"pool {pool_name}: {len(recs)} VMs started and ready")
        return
    assert isinstance(pool, AsgPool)
    infra.StoppedPools = [p for p in infra.StoppedPools if p != pool_name]
    ctx.save()
    managed = _resize_group(gcp, ctx, pool_name, pool.desired)
    if pool.target_cpu_percent is not None:
        mig.sync_autoscaler(gcp, ctx, pool_name, pool)  # back ON, with the pool's schedule if it has one
    fresh = [v for v in infra.VMs if v.Pool == pool_name]
    wait_running(gcp, ctx, fresh)
    wait_bootstrapped(gcp, ctx, fresh)
    ctx.log(f"pool {pool_name}: managed instance group back to {pool.desired} VMs ({len(managed)} ready)")


def keep_stopped(gcp: GcpClients, ctx: Context, pool_name: str) -> None:
    """Every VM of a stopped Fixed pool stopped and recorded so (one still launching is stopped once it
    runs: Google stops a VM only from a settled state)."""
    recs = _fixed_vms(ctx, pool_name)
    wait_running(gcp, ctx, [r for r in recs if r.State is VMState.pending])
    client = gcp.compute("Instances")
    for rec in recs:
        zone, name = str(rec.AZ), instance_name(rec)
        live = _settled(gcp, zone, name)
        if live is None:
            continue  # gone: the VM step recreates it, and this runs again after it
        if live.status not in GONE:
            run(
                gcp,
                "compute.instances.stop",
                lambda z=zone, n=name: client.stop_unary(  # type: ignore[misc]
                    project=gcp.project, zone=z, instance=n, timeout=CALL_TIMEOUT
                ),
                what=f"stop instance {name}",
            )
        rec.State = VMState.stopped
        ctx.save()


def start_vm(gcp: GcpClients, ctx: Context, rec: VMRecord) -> None:
    """Start one stopped Fixed VM (`vmplane start`, and stepRepairDrift for one stopped out of band); one
    already running is done. Its record goes `pending`: the caller (or the VM step) waits for it."""
    zone, name = str(rec.AZ), instance_name(rec)
    live = _settled(gcp, zone, name)
    if live is None:
        raise InvalidRequestError(f"instance {name} is gone: run `vmplane apply` to recreate it")
    if live.status == "SUSPENDED":
        raise InvalidRequestError(f"instance {name} was suspended (not by vmplane): resume it first")
    if live.status == "TERMINATED":
        client = gcp.compute("Instances")
        run(
            gcp,
            "compute.instances.start",
            lambda: client.start_unary(project=gcp.project, zone=zone, instance=name, timeout=CALL_TIMEOUT),
            what=f"start instance {name}",
        )
        rec.State = VMState.pending
    elif rec.State in (VMState.stopped, VMState.pending):
        rec.State = VMState.bootstrap  # already running (started by its schedule or by hand): check readiness
    ctx.save()


def _settled(gcp: GcpClients, zone: str, name: str) -> Any | None:
    """The instance once it is not between states (None if it does not exist)."""

    def check() -> tuple[Any | None] | None:
        live = get_instance(gcp, zone, name)
        return None if live is not None and live.status in MOVING else (live,)

    return poll(check, what=f"instance {name} to settle", timeout=SETTLE_TIMEOUT, first=0.1, cap=10)[0]


def _fixed_vms(ctx: Context, pool_name: str) -> list[VMRecord]:
    return [v for v in ctx.infra.VMs if v.Pool == pool_name and v.AZ and v.Index >= 0]


def _resize_group(gcp: GcpClients, ctx: Context, pool_name: str, size: int) -> list[Any]:
    name = ctx.infra.ScalingGroupID.get(pool_name) or naming.mig(ctx.spec, pool_name)
    group = mig.get_mig(gcp, name)
    if group is None:
        raise InvalidRequestError(f"managed instance group {name} of pool {pool_name} not found: run `vmplane apply`")
    if int(group.target_size) != size:
        mig.resize(gcp, name, size)
    managed = mig.wait_stable(gcp, name, timeout=SETTLE_TIMEOUT)
    mig.sync_records(ctx, pool_name, managed)
    return managed
