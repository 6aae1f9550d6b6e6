"""Pool schedules on AWS's own schedulers, so they keep working while vmplane is down.

- ASG pools: two scheduled actions on the group: at `stop` MinSize 0 / DesiredCapacity 0 (MaxSize kept),
  at `start` the pool's min / desired / max; `Recurrence` is the schedule's cron in its own `TimeZone`.
- Fixed pools: two EventBridge Scheduler schedules that stop and start exactly the pool's instances
  (`eventbridge`), run as a role allowed only that (`scheduler_role`).

Everything is updated in place (PutScheduledUpdateGroupAction overwrites by name, UpdateSchedule
replaces a definition) and removed when its pool's schedule is. A pool that `vmplane stop` stopped keeps
its schedules, paused (the group's `ScheduledActions` process suspended, the EventBridge schedules
DISABLED), so the schedule does not start what the user stopped; `vmplane start` resumes them.

The sandbox (moto) stores scheduled actions and schedules and never fires them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.aws import eventbridge, iam, naming
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import NotFoundError
from vmplane.envspec.models import AsgPool, FixedPool
from vmplane.envspec.schedule import Schedule

SCHEDULED_PROCESS = "ScheduledActions"


def action_requests(ctx: Context, pool_name: str, pool: AsgPool, schedule: Schedule) -> list[dict[str, Any]]:
    """PutScheduledUpdateGroupAction for the pool's start and stop (pure)."""
    group = naming.asg_name(ctx.spec, pool_name)

    def action(kind: eventbridge.Kind) -> dict[str, Any]:
        return {
            "AutoScalingGroupName": group,
            "ScheduledActionName": naming.scheduled_action_name(ctx.spec, pool_name, kind),
            "Recurrence": schedule.cron(kind, "unix"),
            "TimeZone": schedule.timezone,
        }

    return [
        {**action("start"), "MinSize": pool.min, "MaxSize": pool.max, "DesiredCapacity": pool.desired},
        {**action("stop"), "MinSize": 0, "DesiredCapacity": 0},  # MaxSize left as it is
    ]


def action_differs(current: Mapping[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if current is None:
        return True
    if "MaxSize" not in wanted and current.get("MaxSize") is not None:
        return True
    return any(current.get(k) != v for k, v in wanted.items())


def _group_actions(aws: AwsClients, group: str) -> dict[str, Mapping[str, Any]]:
    try:
        found = aws_call(aws.autoscaling.describe_scheduled_actions, AutoScalingGroupName=group)
    except NotFoundError:
        return {}
    return {a["ScheduledActionName"]: a for a in found["ScheduledUpdateGroupActions"]}


def _delete_actions(aws: AwsClients, group: str, names: list[str]) -> None:
    for name in names:
        call = partial(
            aws_call, aws.autoscaling.delete_scheduled_action, AutoScalingGroupName=group, ScheduledActionName=name
        )
        deletes.delete(call, what=f"delete scheduled action {name}")


def _set_paused(aws: AwsClients, ctx: Context, pool_name: str, group: str, paused: bool) -> None:
    """Suspend (or resume) the group's scheduled actions; nothing is sent when it already is so."""
    asg = aws.autoscaling
    groups = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[group])["AutoScalingGroups"]
    if not groups:
        return
    suspended = any(p["ProcessName"] == SCHEDULED_PROCESS for p in groups[0].get("SuspendedProcesses", []))
    if paused and not suspended:
        aws_call(asg.suspend_processes, AutoScalingGroupName=group, ScalingProcesses=[SCHEDULED_PROCESS])
        ctx.log(f"pool {pool_name}: scheduled actions paused while the pool is stopped")
    elif suspended and not paused:
        aws_call(asg.resume_processes, AutoScalingGroupName=group, ScalingProcesses=[SCHEDULED_PROCESS])
        ctx.log(f"pool {pool_name}: scheduled actions resumed")


def ensure_asg_actions(aws: AwsClients, ctx: Context, pool_name: str, pool: AsgPool) -> None:
    ids = aws_ids(ctx.infra)
    group = ctx.infra.ScalingGroupID.get(pool_name) or naming.asg_name(ctx.spec, pool_name)
    schedule = pool.schedule
    if schedule is None:
        if pool_name in ids.ScheduledActions:  # it had a schedule: remove its actions
            _delete_actions(aws, group, ids.ScheduledActions[pool_name])
            _set_paused(aws, ctx, pool_name, group, paused=False)
            ids.ScheduledActions = {k: v for k, v in ids.ScheduledActions.items() if k != pool_name}
            ctx.save()
            ctx.log(f"pool {pool_name}: scheduled actions deleted (no schedule)")
        return
    wanted = action_requests(ctx, pool_name, pool, schedule)
    ids.ScheduledActions = {**ids.ScheduledActions, pool_name: [w["ScheduledActionName"] for w in wanted]}
    ctx.save()  # intent first
    current = _group_actions(aws, group)
    for request in wanted:
        if action_differs(current.get(request["ScheduledActionName"]), request):
            aws_call(aws.autoscaling.put_scheduled_update_group_action, **request)  # overwrites by name
            ctx.log(
                f"pool {pool_name}: scheduled action {request['ScheduledActionName']} "
                f"{request['Recurrence']} {request['TimeZone']} (min {request['MinSize']}, "
                f"desired {request['DesiredCapacity']})"
            )
    _set_paused(aws, ctx, pool_name, group, paused=pool_name in ctx.infra.StoppedPools)


def _fixed_scheduled(ctx: Context) -> dict[str, Schedule]:
    return {n: p.schedule for n, p in ctx.spec.pools.items() if isinstance(p, FixedPool) and p.schedule is not None}


def ensure_fixed_schedules(aws: AwsClients, ctx: Context, only: str | None = None) -> None:
    """Every Fixed pool's schedules (or only pool `only`'s); without any, the group and role go."""
    ids = aws_ids(ctx.infra)
    scheduled = _fixed_scheduled(ctx)
    if not scheduled:
        if only is None and (ids.ScheduleGroupName or ids.Schedules or ids.SchedulerRoleName):
            eventbridge.delete_group(aws, ctx)
            iam.delete_scheduler_role(aws, ctx)  # after the schedules that named it
        return
    role_arn = ids.SchedulerRoleArn or iam.ensure_scheduler_role(aws, ctx)
    group = eventbridge.ensure_group(aws, ctx)
    keep: set[str] = set()
    for pool_name, schedule in sorted(scheduled.items()):
        if only is None or pool_name == only:
            keep.update(eventbridge.ensure_pool(aws, ctx, pool_name, schedule, role_arn))
    if only is None:
        eventbridge.remove_others(aws, ctx, group, keep)


def ensure_schedules(aws: AwsClients, ctx: Context) -> None:
    for pool_name, pool in sorted(ctx.spec.pools.items()):
        if isinstance(pool, AsgPool):
            ensure_asg_actions(aws, ctx, pool_name, pool)
    ensure_fixed_schedules(aws, ctx)


def ensure_pool_schedules(aws: AwsClients, ctx: Context, pool_name: str) -> None:
    """One pool's schedules after `vmplane stop`/`start` (paused or resumed with the pool)."""
    pool = ctx.spec.pools[pool_name]
    if isinstance(pool, AsgPool):
        ensure_asg_actions(aws, ctx, pool_name, pool)
    elif pool.schedule is not None:
        ensure_fixed_schedules(aws, ctx, only=pool_name)


# ---- teardown and leftovers -----------------------------------------------------------------------


def _job_groups(ctx: Context) -> dict[str, str]:
    """ASG name -> pool, from the record and the spec (the names teardown looks under)."""
    out = {g: p for p, g in ctx.infra.ScalingGroupID.items()}
    for pool_name, pool in ctx.spec.pools.items():
        if isinstance(pool, AsgPool):
            out.setdefault(naming.asg_name(ctx.spec, pool_name), pool_name)
    return out


def our_actions(aws: AwsClients, ctx: Context) -> list[tuple[str, str]]:
    """(group, action) for every scheduled action named for one of the job's pools."""
    out = []
    for group, pool_name in sorted(_job_groups(ctx).items()):
        ours = {naming.scheduled_action_name(ctx.spec, pool_name, k) for k in eventbridge.KINDS}
        ours.update(aws_ids(ctx.infra).ScheduledActions.get(pool_name, []))
        out += [(group, name) for name in sorted(_group_actions(aws, group)) if name in ours]
    return out


def delete_schedules(aws: AwsClients, ctx: Context) -> None:
    """Before the VMs go (a scheduled start must not race the teardown); found by name, not the record."""
    actions = our_actions(aws, ctx)
    for group, name in actions:
        _delete_actions(aws, group, [name])
    aws_ids(ctx.infra).ScheduledActions = {}
    ctx.save()
    if actions:
        ctx.log(f"deleted {len(actions)} scheduled actions")
    eventbridge.delete_group(aws, ctx)
