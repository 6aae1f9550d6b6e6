"""`vmplane stop` / `vmplane start` of one pool, at once (the schedules do the same on their own clock).

Fixed pools: StopInstances (the disks stay) and StartInstances on the pool's instances, then running
and the bootstrap sentinel again (it persists on the disk, so readiness is the apply's check). ASG
pools: sized to min 0 / desired 0 (max kept) until the group has no instances, and back to the pool's
sizes. The pool is in `InfraConfig.StoppedPools` while stopped, so an apply or update keeps it stopped,
and its schedules are paused meanwhile (`schedules.ensure_pool_schedules`).

Both are idempotent and resumable: the intent (`StoppedPools`) is recorded first, and each call
converges from whatever state a crash left.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.aws import naming, schedules
from vmplane.clouds.aws.asg import ensure_asg_pool, sync_group_records, wait_capacity
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.instances import (
    RUNNING_TIMEOUT,
    TEARDOWN_TIMEOUT,
    ensure_fixed_pool,
    wait_bootstrapped,
    wait_running,
)
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.waits import poll
from vmplane.envspec.models import AsgPool, FixedPool
from vmplane.state import VMState


def _pool(ctx: Context, pool_name: str) -> FixedPool | AsgPool:
    pool = ctx.spec.pools.get(pool_name)
    if pool is None:
        raise InvalidRequestError(f"no pool {pool_name!r} in {ctx.spec.name} (pools: {', '.join(ctx.spec.pools)})")
    if not isinstance(pool, FixedPool | AsgPool):
        raise InvalidRequestError(f"pool {pool_name}: {pool.mode} pools cannot be stopped here")
    return pool


def _instance_states(aws: AwsClients, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    res = aws_call(aws.ec2.describe_instances, InstanceIds=sorted(ids))["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in res for i in r["Instances"]}


def _wait_states(aws: AwsClients, ids: list[str], wanted: str, *, settled: tuple[str, ...]) -> dict[str, str]:
    """Poll until no instance is in a transition state (anything outside `settled`), raising on a VM
    that terminated; returns the final states."""

    def check() -> dict[str, str] | None:
        states = _instance_states(aws, ids)
        gone = sorted(i for i, s in states.items() if s in ("shutting-down", "terminated"))
        if gone:
            raise InvalidRequestError(f"instances {', '.join(gone)} were terminated outside vmplane")
        return states if all(s in settled for s in states.values()) else None

    return poll(check, what=f"{len(ids)} instances to be {wanted}", timeout=RUNNING_TIMEOUT, first=0.1)


def stop_pool(aws: AwsClients, ctx: Context, pool_name: str) -> None:
    pool, infra = _pool(ctx, pool_name), ctx.infra
    if pool_name not in infra.StoppedPools:
        infra.StoppedPools = sorted([*infra.StoppedPools, pool_name])
        ctx.save()  # intent first: from here on an apply keeps the pool stopped
    schedules.ensure_pool_schedules(aws, ctx, pool_name)  # paused: the schedule must not start it again
    if isinstance(pool, FixedPool):
        _stop_fixed(aws, ctx, pool_name)
    else:
        _stop_group(aws, ctx, pool_name)


def _stop_fixed(aws: AwsClients, ctx: Context, pool_name: str) -> None:
    vms = [v for v in ctx.infra.VMs if v.Pool == pool_name and v.ID]
    ids = [str(v.ID) for v in vms]
    states = _instance_states(aws, ids)
    running = sorted(i for i, s in states.items() if s in ("pending", "running"))
    if running:
        aws_call(aws.ec2.stop_instances, InstanceIds=running)
    _wait_states(aws, ids, "stopped", settled=("stopped",))
    for vm in vms:
        vm.State = VMState.stopped
    ctx.save()
    ctx.log(f"pool {pool_name}: {len(running)} VMs stopped ({len(vms)} in the pool; disks kept)")


def _stop_group(aws: AwsClients, ctx: Context, pool_name: str) -> None:
    name = ctx.infra.ScalingGroupID.get(pool_name) or naming.asg_name(ctx.spec, pool_name)
    group = _describe_group(aws, name)
    if (group["MinSize"], group["DesiredCapacity"]) != (0, 0):
        aws_call(aws.autoscaling.update_auto_scaling_group, AutoScalingGroupName=name, MinSize=0, DesiredCapacity=0)
    wait_capacity(aws, name, 0, timeout=TEARDOWN_TIMEOUT)  # its instances are terminated, not stopped
    sync_group_records(aws, ctx, pool_name, [])
    ctx.log(f"pool {pool_name}: auto scaling group {name} at 0 VMs (max {group['MaxSize']} kept)")


def _describe_group(aws: AwsClients, name: str) -> dict[str, Any]:
    groups = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    if not groups:
        raise InvalidRequestError(f"auto scaling group {name} does not exist: run `vmplane apply` first")
    return dict(groups[0])


def start_pool(aws: AwsClients, ctx: Context, pool_name: str) -> None:
    pool, infra = _pool(ctx, pool_name), ctx.infra
    if pool_name in infra.StoppedPools:
        infra.StoppedPools = [p for p in infra.StoppedPools if p != pool_name]
        ctx.save()  # intent first: from here on the pool is meant to run
    if isinstance(pool, FixedPool):
        _start_fixed(aws, ctx, pool_name, pool)
    else:
        ensure_asg_pool(aws, ctx, pool_name, pool, starting=True)  # the pool's sizes, even out of hours
    wait_running(aws, ctx)
    wait_bootstrapped(aws, ctx)
    schedules.ensure_pool_schedules(aws, ctx, pool_name)  # resumed (a new VM's id is in the Input too)
    ready = [v for v in infra.VMs if v.Pool == pool_name and v.State is VMState.ready]
    ctx.log(f"pool {pool_name}: started, {len(ready)} VMs ready")


def _start_fixed(aws: AwsClients, ctx: Context, pool_name: str, pool: FixedPool) -> None:
    ids = [str(v.ID) for v in ctx.infra.VMs if v.Pool == pool_name and v.ID]
    # A VM still stopping cannot be started yet: wait for it to settle first.
    states = _wait_states(aws, ids, "stopped or running", settled=("stopped", "running"))
    stopped = sorted(i for i, s in states.items() if s == "stopped")
    if stopped:
        aws_call(aws.ec2.start_instances, InstanceIds=stopped)
    # The records follow EC2 (a started VM goes back through readiness), and VMs the pool lacks (its
    # size grew while it was stopped) are launched now.
    ensure_fixed_pool(aws, ctx, pool_name, pool)
