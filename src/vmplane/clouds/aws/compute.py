"""stepCreateVMs and its teardown, over both pool kinds: Fixed pools (`instances`) and ASG pools (`asg`).

The rest of what this module once held lives by responsibility in `security_groups`, `templates`,
`instances`, `asg` and `rotation`.
"""

from __future__ import annotations

from functools import partial

from vmplane.clouds import deletes
from vmplane.clouds.aws.asg import ensure_asg_pool, job_scaling_groups
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.instances import (
    LIVE_STATES,
    TEARDOWN_TIMEOUT,
    ensure_fixed_pool,
    wait_bootstrapped,
    wait_running,
)
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import job_filters
from vmplane.clouds.base import Context
from vmplane.clouds.steps import VMS_RUNNING
from vmplane.clouds.waits import poll
from vmplane.envspec.models import FixedPool
from vmplane.state import VMState


def ensure_vms(aws: AwsClients, ctx: Context) -> None:
    for pool_name, pool in ctx.spec.pools.items():
        if isinstance(pool, FixedPool):
            ensure_fixed_pool(aws, ctx, pool_name, pool)
        else:
            ensure_asg_pool(aws, ctx, pool_name, pool)
    wait_running(aws, ctx)
    ctx.reached(VMS_RUNNING)  # the target group can register them while they bootstrap
    wait_bootstrapped(aws, ctx)


# ---- teardown -------------------------------------------------------------------------------------


def delete_vms(aws: AwsClients, ctx: Context) -> None:
    ec2, asg, t = aws.ec2, aws.autoscaling, ctx.tagger
    # ASG pools: min=max=desired=0 first (teardown order: no new instances while they go), then delete.
    # A recorded group may be gone already (a crash right after DeleteAutoScalingGroup): NotFound is done.
    for name in _job_asg_names(aws, ctx):
        drain = partial(
            aws_call, asg.update_auto_scaling_group, AutoScalingGroupName=name, MinSize=0, MaxSize=0, DesiredCapacity=0
        )
        if deletes.delete(drain, what=f"scale {name} to 0"):
            # ScalingActivityInProgress/ResourceInUse while the scale-in starts: retried as in use.
            drop = partial(aws_call, asg.delete_auto_scaling_group, AutoScalingGroupName=name, ForceDelete=True)
            deletes.delete(drop, what=f"delete {name}")
        poll(
            partial(_asg_gone, aws, name),
            what=f"auto scaling group {name} deletion",
            timeout=TEARDOWN_TIMEOUT,
            first=0.1,
        )
    ctx.infra.ScalingGroupID = {}
    ctx.save()

    res = aws_call(
        ec2.describe_instances,
        Filters=[*job_filters(t), {"Name": "instance-state-name", "Values": [*LIVE_STATES, "shutting-down"]}],
    )["Reservations"]
    ids = sorted(i["InstanceId"] for r in res for i in r["Instances"])
    if ids:
        aws_call(ec2.terminate_instances, InstanceIds=ids)
        for vm in ctx.infra.VMs:
            vm.State = VMState.terminated
        ctx.save()

        def terminated() -> bool | None:
            r = aws_call(ec2.describe_instances, InstanceIds=ids)["Reservations"]
            return True if all(i["State"]["Name"] == "terminated" for x in r for i in x["Instances"]) else None

        poll(terminated, what=f"{len(ids)} instances to terminate", timeout=TEARDOWN_TIMEOUT, first=0.1)
    ctx.infra.VMs = []
    ctx.save()
    ctx.log(f"terminated {len(ids)} instances")


def _asg_gone(aws: AwsClients, name: str) -> bool | None:
    groups = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return True if not groups else None


def _job_asg_names(aws: AwsClients, ctx: Context) -> list[str]:
    return sorted(set(ctx.infra.ScalingGroupID.values()) | set(job_scaling_groups(aws, ctx.tagger)))
