"""ASG pools: the group (sizes diffed in place), its target-tracking policy, the pool's VM records
following the group, and the instance refresh request that `vmplane rotate` sends."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from vmplane.clouds.aws import naming
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.instances import RUNNING_TIMEOUT, call_retrying_profile, record_instance
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import owned_by, tag_owner
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import ConflictError, NotFoundError
from vmplane.clouds.waits import poll
from vmplane.envspec.models import AsgPool
from vmplane.state import VMRecord

TARGET_TRACKING_POLICY = "vmplane-cpu-target"


def wanted_sizes(pool: AsgPool, *, held: bool = False) -> dict[str, int]:
    """The group's sizes: the pool's, or min 0 / desired 0 (max kept) while the pool is held stopped."""
    if held:
        return {"MinSize": 0, "MaxSize": pool.max, "DesiredCapacity": 0}
    return {"MinSize": pool.min, "MaxSize": pool.max, "DesiredCapacity": pool.desired}


def size_update(group: Mapping[str, Any], pool: AsgPool, *, held: bool = False) -> dict[str, int] | None:
    """UpdateAutoScalingGroup's sizes when the described group's differ from the wanted ones, else None."""
    sizes = wanted_sizes(pool, held=held)
    if all(group[k] == v for k, v in sizes.items()):
        return None
    return sizes


def held_reason(
    pool_name: str, pool: AsgPool, group: Mapping[str, Any] | None, stopped: list[str], now: datetime
) -> str | None:
    """Why an apply keeps the group at 0 rather than at the pool's sizes, or None: `vmplane stop`
    stopped it, or its schedule stopped it and the running window has not come yet (sizing it up now
    would undo the schedule until its next stop)."""
    if pool_name in stopped:
        return "stopped by `vmplane stop` (`vmplane start` sizes it up)"
    if pool.schedule is None or group is None or group["DesiredCapacity"] != 0:
        return None
    if pool.schedule.is_running_at(now):
        return None
    _, at = pool.schedule.next_change(now)
    return f"outside its schedule's hours (its scheduled action starts it {at.isoformat(timespec='minutes')})"


def policy_change(pool: AsgPool, present: bool | None) -> Literal["put", "delete"] | None:
    """With a CPU target the policy is put every time (PutScalingPolicy replaces by name); without one
    it goes if `present` (None: not looked up yet, which only matters without a target)."""
    if pool.target_cpu_percent is not None:
        return "put"
    return "delete" if present else None


def ensure_asg_pool(
    aws: AwsClients, ctx: Context, pool_name: str, pool: AsgPool, *, starting: bool = False, now: datetime | None = None
) -> None:
    """The group at the pool's sizes and its VMs in service. `starting` (`vmplane start`): the pool's
    sizes even outside its schedule's hours."""
    asg, infra, t = aws.autoscaling, ctx.infra, ctx.tagger
    name = naming.asg_name(ctx.spec, pool_name)
    infra.ScalingGroupID = {**infra.ScalingGroupID, pool_name: name}
    ctx.save()
    groups = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    # `vmplane start` runs the pool now, in or out of its schedule's hours, until the schedule's next stop.
    group = groups[0] if groups else None
    held = None if starting else held_reason(pool_name, pool, group, infra.StoppedPools, now or datetime.now(UTC))
    sizes = wanted_sizes(pool, held=held is not None)
    if held:
        ctx.log(f"pool {pool_name}: kept at 0 VMs, {held}")
    if groups:
        if not owned_by(groups[0].get("Tags", []), t):
            owner = tag_owner(groups[0].get("Tags", []), t)
            raise ConflictError(f"auto scaling group {name} exists and belongs to {owner or 'someone else'}")
        _follow_template(aws, ctx, pool_name, groups[0])
        # Sizes are a cloud change, applied in place; instances that stay in range are kept.
        if (update := size_update(groups[0], pool, held=held is not None)) is not None:
            aws_call(asg.update_auto_scaling_group, AutoScalingGroupName=name, **update)
            ctx.log(
                f"pool {pool_name}: sizes now min {update['MinSize']} / desired {update['DesiredCapacity']} "
                f"/ max {update['MaxSize']}"
            )
    else:
        call_retrying_profile(  # an instance profile IAM made seconds ago is refused for a while
            asg.create_auto_scaling_group,
            f"create auto scaling group {name}",
            AutoScalingGroupName=name,
            # $Latest: a new template version applies to instances launched from now on; running ones are
            # replaced only by `vmplane rotate` (an instance refresh), never silently. Pinned: even new
            # instances keep the version until a rotate moves the group on.
            LaunchTemplate={
                "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
                "Version": group_version(ctx, pool_name),
            },
            **sizes,
            VPCZoneIdentifier=",".join(infra.VMSubnetIDs),
            HealthCheckGracePeriod=ctx.spec.bootstrap.timeout_seconds,
            Tags=[
                {
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                }
                for k, v in sorted(t.tags("vm", naming.asg_instance_name(ctx.spec, pool_name)).items())
            ],
        )
    _ensure_scaling_policy(aws, name, pool)

    instances = wait_capacity(aws, name, sizes["DesiredCapacity"])
    sync_group_records(aws, ctx, pool_name, [i["InstanceId"] for i in instances])
    ctx.log(f"pool {pool_name}: auto scaling group {name} with {len(instances)} in service")


def _follow_template(aws: AwsClients, ctx: Context, pool_name: str, group: Mapping[str, Any]) -> None:
    """The group launches from the pool's recorded template: one made again (its template was deleted
    out of band, `repair`) has a new id, and the group would otherwise keep naming the deleted one."""
    want = ctx.infra.LaunchTemplateID[pool_name]
    if (group.get("LaunchTemplate") or {}).get("LaunchTemplateId") == want:
        return
    aws_call(
        aws.autoscaling.update_auto_scaling_group,
        AutoScalingGroupName=group["AutoScalingGroupName"],
        LaunchTemplate={"LaunchTemplateId": want, "Version": group_version(ctx, pool_name)},
    )
    ctx.log(f"pool {pool_name}: auto scaling group {group['AutoScalingGroupName']} now launches from {want}")


def wait_capacity(
    aws: AwsClients, name: str, desired: int, timeout: float = RUNNING_TIMEOUT
) -> Sequence[Mapping[str, Any]]:
    """Wait until the group holds exactly `desired` instances, all InService; returns them."""

    def at_capacity() -> Sequence[Mapping[str, Any]] | None:
        g = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
        up = [i for i in g.get("Instances", []) if i["LifecycleState"] == "InService"]
        return up if len(up) == desired and len(g.get("Instances", [])) == desired else None

    return poll(at_capacity, what=f"auto scaling group {name} capacity", timeout=timeout, first=0.1)


def group_version(ctx: Context, pool_name: str) -> str:
    pool = ctx.spec.pools[pool_name]
    if isinstance(pool, AsgPool) and pool.pin_template_version:
        return str(ctx.infra.LaunchTemplateVersion[pool_name])
    return "$Latest"


def _ensure_scaling_policy(aws: AwsClients, group: str, pool: AsgPool) -> None:
    asg = aws.autoscaling
    present: bool | None = None
    if pool.target_cpu_percent is None:
        with contextlib.suppress(NotFoundError):
            policies = aws_call(asg.describe_policies, AutoScalingGroupName=group, PolicyNames=[TARGET_TRACKING_POLICY])
            present = bool(policies["ScalingPolicies"])
    action = policy_change(pool, present)
    if action == "delete":
        aws_call(asg.delete_policy, AutoScalingGroupName=group, PolicyName=TARGET_TRACKING_POLICY)
    elif action == "put" and pool.target_cpu_percent is not None:
        aws_call(  # PutScalingPolicy creates or replaces: idempotent by name
            asg.put_scaling_policy,
            AutoScalingGroupName=group,
            PolicyName=TARGET_TRACKING_POLICY,
            PolicyType="TargetTrackingScaling",
            TargetTrackingConfiguration={
                "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
                "TargetValue": float(pool.target_cpu_percent),
            },
        )


def sync_group_records(aws: AwsClients, ctx: Context, pool_name: str, ids: list[str]) -> None:
    """The pool's VM records follow the group: new instances are added, gone ones dropped."""
    infra = ctx.infra
    described = {}
    if ids:
        res = aws_call(aws.ec2.describe_instances, InstanceIds=sorted(ids))["Reservations"]
        described = {i["InstanceId"]: i for r in res for i in r["Instances"]}
    kept = [v for v in infra.VMs if v.Pool != pool_name or v.ID in described]
    known = {v.ID for v in kept}
    for iid in sorted(described):
        if iid not in known:
            rec = VMRecord(Name=iid, Pool=pool_name, Index=-1)
            record_instance(rec, described[iid])
            kept.append(rec)
    infra.VMs = kept
    ctx.save()


def job_scaling_groups(aws: AwsClients, tagger: Tagger) -> list[str]:
    """Auto scaling groups tagged with the job, checked client-side over every page (tag filters on
    DescribeAutoScalingGroups are not supported everywhere)."""
    with aws_errors():
        pages = aws.autoscaling.get_paginator("describe_auto_scaling_groups").paginate()
        return [
            g["AutoScalingGroupName"]
            for page in pages
            for g in page["AutoScalingGroups"]
            if owned_by(g.get("Tags", []), tagger)
        ]


def instance_refresh_request(ctx: Context, pool_name: str) -> dict[str, Any]:
    """StartInstanceRefresh for an ASG pool: rolling, never below full healthy capacity."""
    infra = ctx.infra
    return {
        "AutoScalingGroupName": infra.ScalingGroupID[pool_name],
        "Strategy": "Rolling",
        # On success the group takes this configuration (a pinned group moves to the current version).
        "DesiredConfiguration": {
            "LaunchTemplate": {
                "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
                "Version": group_version(ctx, pool_name),
            }
        },
        "Preferences": {
            "MinHealthyPercentage": 100,  # launch before terminate: the pool never drops below its size
            "MaxHealthyPercentage": 200,
            "InstanceWarmup": ctx.spec.bootstrap.timeout_seconds,
            "SkipMatching": True,  # instances already on the latest version stay
        },
    }
