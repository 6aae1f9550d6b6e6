"""`vmplane rotate`: replace a pool's VMs that run an outdated launch template version, explicitly.

Fixed pools go one VM at a time (`rotate_fixed_vm`); ASG pools by an instance refresh that keeps
100 % healthy capacity. Nothing here runs unless the user asks: a new template version alone never
replaces a VM.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vmplane.clouds.aws import targets, tokens
from vmplane.clouds.aws.asg import instance_refresh_request
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.instances import (
    instances_named,
    launched_version,
    record_instance,
    run_instance,
    terminate,
    wait_bootstrapped,
    wait_running,
)
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, DeadlineExceededError, UnsupportedError
from vmplane.envspec.models import AsgPool
from vmplane.state import InfraConfig, VMRecord, VMState


def health_timeout(ctx: Context) -> float:
    lb = ctx.spec.load_balancer
    if lb is None:
        return 0.0
    hc = lb.health_check
    return float(hc.interval_seconds * hc.healthy_threshold * 2 + 60)


def rotate_pool(aws: AwsClients, ctx: Context, pool_name: str) -> list[str]:
    pool = ctx.spec.pools[pool_name]
    todo = ctx.infra.vms_to_rotate(pool_name)
    if not todo:
        return [f"{pool_name}: every VM runs template v{ctx.infra.LaunchTemplateVersion.get(pool_name)}"]
    if isinstance(pool, AsgPool):
        return [_refresh(aws, ctx, pool_name, len(todo))]
    for vm in todo:
        rotate_fixed_vm(aws, ctx, vm, health_timeout(ctx))
    return [f"{pool_name}: replaced {len(todo)} VMs one at a time ({', '.join(v.Name for v in todo)})"]


def rotate_fixed_vm(aws: AwsClients, ctx: Context, rec: VMRecord, health_timeout: float) -> None:
    """Replace one VM with one from the pool's current template version, under the same stable name.

    Order keeps the pool at full size: the replacement is launched, bootstrapped and healthy behind the
    LB before the old VM is drained and terminated. `ReplacementID` is the intent that makes a crash at
    any point resumable: the next run finds the replacement by name and carries on.
    """
    infra = ctx.infra
    old_id = rec.ID
    version = infra.LaunchTemplateVersion[rec.Pool]
    if rec.ReplacementID is None:
        live = [i for i in instances_named(aws, ctx, rec.Name) if i["InstanceId"] != old_id]
        fresh: Mapping[str, Any] | None = next((i for i in live if launched_version(i) == version), None)
        if fresh is None:
            subnet = rec.SubnetID or infra.VMSubnetIDs[rec.Index % len(infra.VMSubnetIDs)]
            suffix = tokens.rotation_suffix(version, aws_ids(infra).LaunchTemplateAttempts.get(rec.Pool, 0))
            fresh = run_instance(aws, ctx, rec.Pool, rec.Name, subnet, token_suffix=suffix)
        rec.ReplacementID = fresh["InstanceId"]
        ctx.save()
    new = VMRecord(Name=rec.Name, Pool=rec.Pool, Index=rec.Index, ID=rec.ReplacementID)
    probe = InfraConfig(VMs=[new])
    sub = Context(job_id=ctx.job_id, spec=ctx.spec, infra=probe, tagger=ctx.tagger, log=ctx.log)
    wait_running(aws, sub)
    wait_bootstrapped(aws, sub)
    if new.State is not VMState.ready:
        raise DeadlineExceededError(f"replacement {new.ID} for {rec.Name} did not become ready")
    targets.register_target(aws, ctx, str(new.ID))
    targets.wait_healthy(aws, ctx, str(new.ID), timeout=health_timeout)
    if old_id:
        targets.drain_target(aws, ctx, old_id)
        terminate(aws, [old_id])
    res = aws_call(aws.ec2.describe_instances, InstanceIds=[str(new.ID)])["Reservations"]
    record_instance(rec, res[0]["Instances"][0])
    rec.State, rec.ReplacementID = VMState.ready, None
    ctx.save()
    ctx.log(f"{rec.Name}: {old_id} -> {rec.ID} (template v{rec.LaunchTemplateVersion})")


def start_instance_refresh(aws: AwsClients, ctx: Context, pool_name: str) -> str:
    """Start (or find the running) instance refresh; returns its id. Raises UnsupportedError where the
    endpoint does not implement it (the sandbox)."""
    request = instance_refresh_request(ctx, pool_name)
    try:
        return str(aws_call(aws.autoscaling.start_instance_refresh, **request)["InstanceRefreshId"])
    except ConflictError:  # InstanceRefreshInProgress: one is already running for this group
        running = aws_call(
            aws.autoscaling.describe_instance_refreshes, AutoScalingGroupName=request["AutoScalingGroupName"]
        )["InstanceRefreshes"]
        return str(running[0]["InstanceRefreshId"])


def _refresh(aws: AwsClients, ctx: Context, pool_name: str, outdated: int) -> str:
    group = ctx.infra.ScalingGroupID[pool_name]
    try:
        refresh_id = start_instance_refresh(aws, ctx, pool_name)
    except UnsupportedError:
        # The sandbox (moto) does not implement StartInstanceRefresh. The request was sent as it would be
        # to AWS; nothing was replaced, and the outdated VMs stay listed as outdated.
        ctx.log(f"WARNING: the endpoint does not support StartInstanceRefresh; {group} was not refreshed")
        return (
            f"{pool_name}: the endpoint does not support instance refresh (StartInstanceRefresh); "
            f"{outdated} VMs of {group} still run an outdated version"
        )
    return f"{pool_name}: instance refresh {refresh_id} started on {group} for {outdated} outdated VMs"
