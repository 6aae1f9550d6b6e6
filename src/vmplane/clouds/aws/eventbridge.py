"""Fixed pools' schedules on EventBridge Scheduler: a `stop` and a `start` schedule per pool whose
universal targets call EC2 StopInstances / StartInstances on exactly the pool's instances.

Schedules take no tags, so they live in a schedule group of the environment's own (tagged like every
other resource): ownership is checked on the group, teardown deletes what the group holds and then
the group, and two environments' schedules can never be mixed up. The schedules run as the scheduler
role (`iam.ensure_scheduler_role`, policy in `scheduler_role`).

The sandbox (moto) stores schedules and returns them as sent, but never fires one: what is tested
there is the definition, not a stop at 19:00.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any, Literal

from vmplane.clouds import deletes
from vmplane.clouds.aws import naming
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.naming import partition
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, owned_by, tag_list, tag_owner
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError, TransientError
from vmplane.clouds.waits import poll, retry
from vmplane.envspec.schedule import Schedule
from vmplane.state import VMState

Kind = Literal["start", "stop"]
KINDS: tuple[Kind, Kind] = ("start", "stop")
IAM_PROPAGATION_TIMEOUT = 120.0
GROUP_DELETE_TIMEOUT = 300.0
# A start or stop that cannot run within the hour is dropped rather than run hours late.
RETRY_POLICY = {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 20}
# What a schedule definition holds, as CreateSchedule takes it and GetSchedule returns it.
_COMPARED = ("ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow", "State", "Description")


def target_arn(region: str, kind: Kind) -> str:
    """EventBridge Scheduler's universal target for EC2 StartInstances / StopInstances."""
    return f"arn:{partition(region)}:scheduler:::aws-sdk:ec2:{kind}Instances"


def instance_input(instance_ids: list[str]) -> str:
    """The target's Input: the API call's parameters, exactly the pool's instances (sorted: stable)."""
    return json.dumps({"InstanceIds": sorted(instance_ids)}, separators=(",", ":"))


def pool_instance_ids(ctx: Context, pool_name: str) -> list[str]:
    return sorted(v.ID for v in ctx.infra.VMs if v.Pool == pool_name and v.ID and v.State is not VMState.terminated)


def schedule_request(
    ctx: Context,
    pool_name: str,
    schedule: Schedule,
    kind: Kind,
    instance_ids: list[str],
    role_arn: str,
    *,
    paused: bool,
) -> dict[str, Any]:
    """CreateSchedule / UpdateSchedule for one pool and kind (both take the whole definition)."""
    spec = ctx.spec
    return {
        "Name": naming.schedule_name(spec, pool_name, kind),
        "GroupName": naming.schedule_group_name(spec),
        "ScheduleExpression": schedule.cron(kind, "eventbridge"),
        "ScheduleExpressionTimezone": schedule.timezone,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        # Paused while `vmplane stop` holds the pool: the schedule must not start what the user stopped.
        "State": "DISABLED" if paused else "ENABLED",
        "Description": f"vmplane {spec.org}/{spec.name}: {kind} pool {pool_name} ({len(instance_ids)} VMs)",
        "Target": {
            "Arn": target_arn(spec.provider.region, kind),
            "RoleArn": role_arn,
            "Input": instance_input(instance_ids),
            "RetryPolicy": dict(RETRY_POLICY),
        },
    }


def differs(current: Mapping[str, Any], wanted: dict[str, Any]) -> bool:
    if any(current.get(k) != wanted[k] for k in _COMPARED):
        return True
    have, want = current.get("Target", {}), wanted["Target"]
    return any(have.get(k) != v for k, v in want.items())


def role_not_yet_assumable(err: InvalidRequestError) -> bool:
    """CreateSchedule refusing a role IAM created seconds ago (IAM is eventually consistent): AWS says
    ValidationException "The execution role you provide must allow AWS EventBridge Scheduler to assume
    the role." A retry succeeds once the role has propagated; any other ValidationException is real."""
    text = str(err.args[0]).lower() if err.args else ""
    return err.code == "ValidationException" and "role" in text and "assume" in text


def _put(aws: AwsClients, request: dict[str, Any], *, create: bool) -> str:
    sched = aws.scheduler

    def call() -> str:
        try:
            if create:
                try:
                    return str(aws_call(sched.create_schedule, **request)["ScheduleArn"])
                except ConflictError:  # created meanwhile (a resumed step racing itself): update it
                    pass
            return str(aws_call(sched.update_schedule, **request)["ScheduleArn"])
        except InvalidRequestError as err:
            if role_not_yet_assumable(err):
                raise TransientError(str(err), code=err.code, operation=err.operation) from err
            raise

    return retry(call, what=f"schedule {request['Name']}", timeout=IAM_PROPAGATION_TIMEOUT)


# ---- the group ------------------------------------------------------------------------------------


def group_arn_tags(aws: AwsClients, name: str) -> tuple[str, TagList]:
    """(ARN, tags) of a schedule group; NotFoundError if there is none."""
    arn = str(aws_call(aws.scheduler.get_schedule_group, Name=name)["Arn"])
    return arn, list(aws_call(aws.scheduler.list_tags_for_resource, ResourceArn=arn).get("Tags", []))


def _group(aws: AwsClients, ctx: Context, name: str) -> tuple[str, TagList] | None:
    """(ARN, tags) of the group if it exists and is this job's; None if it does not exist; raises if
    it is another's."""
    try:
        arn, tags = group_arn_tags(aws, name)
    except NotFoundError:
        return None
    if not owned_by(tags, ctx.tagger):
        owner = tag_owner(tags, ctx.tagger)
        raise ConflictError(f"schedule group {name} exists and belongs to {owner or 'something outside vmplane'}")
    return arn, tags


def owned_group(aws: AwsClients, ctx: Context) -> tuple[str, TagList] | None:
    return _group(aws, ctx, aws_ids(ctx.infra).ScheduleGroupName or naming.schedule_group_name(ctx.spec))


def ensure_group(aws: AwsClients, ctx: Context) -> str:
    ids = aws_ids(ctx.infra)
    name = naming.schedule_group_name(ctx.spec)
    ids.ScheduleGroupName = name
    ctx.save()  # intent first
    if _group(aws, ctx, name) is None:
        try:
            aws_call(
                aws.scheduler.create_schedule_group,
                Name=name,
                Tags=tag_list(ctx.tagger.tags("schedule-group", name)),
            )
        except ConflictError:
            _group(aws, ctx, name)  # created meanwhile: ours, or raise
    return name


def _names_in(aws: AwsClients, group: str) -> list[str]:
    with aws_errors():
        pages = aws.scheduler.get_paginator("list_schedules").paginate(GroupName=group)
        return sorted(s["Name"] for page in pages for s in page["Schedules"])


def group_contents(aws: AwsClients, ctx: Context) -> tuple[str, list[str]] | None:
    """(group, its schedules) when the environment's group exists and is this job's, else None."""
    name = aws_ids(ctx.infra).ScheduleGroupName or naming.schedule_group_name(ctx.spec)
    if _group(aws, ctx, name) is None:
        return None
    return name, _names_in(aws, name)


def delete_group(aws: AwsClients, ctx: Context) -> None:
    """Every schedule in the environment's group, then the group; already gone is done."""
    ids = aws_ids(ctx.infra)
    found = group_contents(aws, ctx)
    if found is not None:
        group, names = found
        for name in names:
            call = partial(aws_call, aws.scheduler.delete_schedule, Name=name, GroupName=group)
            deletes.delete(call, what=f"delete schedule {name}")
        deletes.delete(partial(aws_call, aws.scheduler.delete_schedule_group, Name=group), what=f"delete {group}")

        def gone() -> bool | None:  # AWS deletes a group asynchronously (state DELETING)
            try:
                aws_call(aws.scheduler.get_schedule_group, Name=group)
            except NotFoundError:
                return True
            return None

        poll(gone, what=f"schedule group {group} deletion", timeout=GROUP_DELETE_TIMEOUT, first=0.1)
        ctx.log(f"deleted schedule group {group} and its {len(names)} schedules")
    ids.ScheduleGroupName, ids.Schedules = None, {}
    ctx.save()


# ---- the pools' schedules -------------------------------------------------------------------------


def ensure_pool(aws: AwsClients, ctx: Context, pool_name: str, schedule: Schedule, role_arn: str) -> list[str]:
    """The pool's two schedules as wanted now (created, or updated in place); returns their names."""
    ids = aws_ids(ctx.infra)
    instance_ids = pool_instance_ids(ctx, pool_name)
    if not instance_ids:
        ctx.log(f"pool {pool_name}: no instances yet, so no schedule (made once the pool has VMs)")
        return []
    paused = pool_name in ctx.infra.StoppedPools
    names = []
    for kind in KINDS:
        wanted = schedule_request(ctx, pool_name, schedule, kind, instance_ids, role_arn, paused=paused)
        name, group = wanted["Name"], wanted["GroupName"]
        try:
            current: Mapping[str, Any] | None = aws_call(aws.scheduler.get_schedule, Name=name, GroupName=group)
        except NotFoundError:
            current = None
        if current is None or differs(current, wanted):
            ids.Schedules = {**ids.Schedules, name: _put(aws, wanted, create=current is None)}
            ctx.save()
            how = "created" if current is None else "updated in place"
            ctx.log(f"schedule {name} {how}: {wanted['ScheduleExpression']} {schedule.timezone}, {wanted['State']}")
        else:
            ids.Schedules = {**ids.Schedules, name: str(current["Arn"])}
        names.append(name)
    return names


def remove_others(aws: AwsClients, ctx: Context, group: str, keep: set[str]) -> None:
    """Schedules in the group that no pool wants any more (a schedule removed, a pool gone)."""
    ids = aws_ids(ctx.infra)
    for name in _names_in(aws, group):
        if name not in keep:
            deletes.delete(
                partial(aws_call, aws.scheduler.delete_schedule, Name=name, GroupName=group),
                what=f"delete schedule {name}",
            )
            ctx.log(f"schedule {name} deleted (its pool has no schedule now)")
    ids.Schedules = {k: v for k, v in ids.Schedules.items() if k in keep}
    ctx.save()
