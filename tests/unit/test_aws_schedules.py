"""AWS schedules: the documents and requests (pure), and the driver's schedule, stop and start calls on
moto's in-process mock, read back through boto3. moto stores scheduled actions and EventBridge
schedules but never fires them: what is checked is what the schedulers were told."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from unittest.mock import ANY

import pytest

from vmplane.clouds.aws import conflicts, naming, scheduler_role
from vmplane.clouds.aws.asg import ensure_asg_pool, held_reason, size_update
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.eventbridge import instance_input, role_not_yet_assumable, schedule_request, target_arn
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.instances import follow_power_state
from vmplane.clouds.aws.schedules import action_differs, action_requests
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.base import Tagger
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.envspec.models import AsgPool, EnvSpec
from vmplane.state import VMRecord, VMState

from .support import JOB_ID, REGION, make_ctx, variant

BERLIN = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
POOLS = {
    "web": {"mode": "fixed", "size": 2, "schedule": BERLIN},
    "batch": {"mode": "asg", "min": 1, "max": 3, "desired": 2, "schedule": BERLIN},
}


@pytest.fixture(scope="module")
def scheduled(spec: EnvSpec) -> EnvSpec:
    return variant(spec, pools=POOLS)


# ---- pure -----------------------------------------------------------------------------------------


def test_the_scheduler_role_may_only_start_and_stop_this_jobs_instances() -> None:
    tagger = Tagger(prefix="zop:", org="acme", job_id=JOB_ID, env="demo")
    doc = scheduler_role.permissions_policy(tagger, "123456789012", "eu-central-1")
    assert doc == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StartStopThisJobsInstances",
                "Effect": "Allow",
                "Action": ["ec2:StartInstances", "ec2:StopInstances"],
                "Resource": "arn:aws:ec2:eu-central-1:123456789012:instance/*",
                "Condition": {"StringEquals": {"aws:ResourceTag/zop:jobId": JOB_ID}},
            }
        ],
    }
    trust = scheduler_role.trust_policy("123456789012", "eu-central-1", "vmplane-acme-demo-schedules")
    (stmt,) = trust["Statement"]
    assert stmt["Principal"] == {"Service": "scheduler.amazonaws.com"} and stmt["Action"] == "sts:AssumeRole"
    assert stmt["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {
            "aws:SourceArn": "arn:aws:scheduler:eu-central-1:123456789012:schedule/vmplane-acme-demo-schedules/*"
        },
    }
    assert scheduler_role.partition("cn-north-1") == "aws-cn"


def test_a_fixed_pools_schedule_targets_exactly_its_instances(scheduled: EnvSpec) -> None:
    ctx = make_ctx(scheduled)
    sched = scheduled.pools["web"].schedule
    assert sched is not None
    assert instance_input(["i-b", "i-a"]) == '{"InstanceIds":["i-a","i-b"]}'
    stop = schedule_request(ctx, "web", sched, "stop", ["i-b", "i-a"], "arn:role", paused=False)
    assert stop["Name"] == "demo-fixed-web-stop" and stop["GroupName"] == "vmplane-acme-demo-fixed-schedules"
    assert stop["ScheduleExpression"] == "cron(0 19 ? * MON,TUE,WED,THU,FRI *)"
    assert stop["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert stop["FlexibleTimeWindow"] == {"Mode": "OFF"} and stop["State"] == "ENABLED"
    assert stop["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:ec2:stopInstances"
    assert json.loads(stop["Target"]["Input"]) == {"InstanceIds": ["i-a", "i-b"]}
    paused = schedule_request(ctx, "web", sched, "start", ["i-a"], "arn:role", paused=True)
    assert paused["State"] == "DISABLED" and paused["Target"]["Arn"] == target_arn(REGION, "start")


def test_long_names_fit_the_schedulers_limits(spec: EnvSpec) -> None:
    long = variant(spec, name="e" * 32, org="o" * 32, pools={"p" * 32: {"mode": "fixed", "size": 1}})
    names = [
        naming.schedule_group_name(long),
        naming.schedule_name(long, "p" * 32, "start"),
        naming.scheduler_role_name(long),
    ]
    assert all(len(n) <= 64 for n in names)
    assert naming.schedule_name(long, "p" * 32, "start") != naming.schedule_name(long, "p" * 32, "stop")


def test_an_asg_pools_actions_scale_to_zero_and_back(scheduled: EnvSpec) -> None:
    pool = scheduled.pools["batch"]
    assert isinstance(pool, AsgPool) and pool.schedule is not None
    start, stop = action_requests(make_ctx(scheduled), "batch", pool, pool.schedule)
    group = "vmplane-acme-demo-fixed-batch"
    assert start == {
        "AutoScalingGroupName": group,
        "ScheduledActionName": f"{group}-start",
        "Recurrence": "0 8 * * 1,2,3,4,5",
        "TimeZone": "Europe/Berlin",
        "MinSize": 1,
        "MaxSize": 3,
        "DesiredCapacity": 2,
    }
    assert stop["Recurrence"] == "0 19 * * 1,2,3,4,5" and (stop["MinSize"], stop["DesiredCapacity"]) == (0, 0)
    assert "MaxSize" not in stop  # kept as it is
    assert not action_differs({**stop, "StartTime": "2026-12-01T18:00:00Z"}, stop)
    assert action_differs({**stop, "MaxSize": 3}, stop) and action_differs(None, stop)


def test_an_apply_keeps_a_stopped_or_out_of_hours_group_at_zero(scheduled: EnvSpec) -> None:
    pool = scheduled.pools["batch"]
    assert isinstance(pool, AsgPool)
    night = datetime(2026, 12, 2, 22, 0, tzinfo=UTC)  # a Wednesday, 23:00 in Berlin
    noon = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
    at_zero = {"MinSize": 0, "MaxSize": 3, "DesiredCapacity": 0}
    assert "outside its schedule's hours" in (held_reason("batch", pool, at_zero, [], night) or "")
    assert held_reason("batch", pool, at_zero, [], noon) is None  # in hours: sized up
    assert held_reason("batch", pool, {**at_zero, "DesiredCapacity": 2}, [], night) is None  # running: left
    assert held_reason("batch", pool, None, [], night) is None  # a new group starts at the pool's sizes
    assert "vmplane stop" in (held_reason("batch", pool, at_zero, ["batch"], noon) or "")
    assert size_update(at_zero, pool, held=True) is None
    assert size_update(at_zero, pool) == {"MinSize": 1, "MaxSize": 3, "DesiredCapacity": 2}


def test_records_follow_a_stop_or_start_made_by_the_schedule() -> None:
    rec = VMRecord(Name="a", Pool="web", Index=0, ID="i-1", State=VMState.ready)
    follow_power_state(rec, {"State": {"Name": "stopped"}})
    assert rec.State is VMState.stopped
    follow_power_state(rec, {"State": {"Name": "running"}})
    assert rec.State is VMState.pending  # started again: readiness is checked again


def test_only_the_role_propagation_error_is_retried() -> None:
    msg = "The execution role you provide must allow AWS EventBridge Scheduler to assume the role."
    assert role_not_yet_assumable(InvalidRequestError(msg, code="ValidationException"))
    assert not role_not_yet_assumable(InvalidRequestError("Invalid cron expression", code="ValidationException"))


# ---- on moto --------------------------------------------------------------------------------------


def test_another_jobs_scheduler_role_is_refused_before_anything_is_made(aws, scheduled: EnvSpec) -> None:
    name = naming.scheduler_role_name(scheduled)
    aws.iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}", Tags=[{"Key": "zop:jobId", "Value": "job-x"}])
    with pytest.raises(ConflictError, match=f"IAM role {name} already exists and belongs to job job-x"):
        conflicts.check_names(aws, make_ctx(scheduled))


def _provision(driver: AwsDriver, spec: EnvSpec):
    ctx = make_ctx(spec)
    for step in (
        driver.preflight,
        driver.network.ensure,
        partial(create_identity, driver),
        driver.pools.ensure_templates,
        driver.pools.ensure_vms,
        driver.scheduler.ensure,
    ):
        step(ctx)
    return ctx


def test_schedules_created_updated_paused_removed_and_torn_down(aws_iam, scheduled: EnvSpec) -> None:
    driver = AwsDriver(AwsTarget(region=REGION))
    aws = driver.aws
    ctx = _provision(driver, scheduled)
    ids = aws_ids(ctx.infra)
    web_ids = sorted(v.ID for v in ctx.infra.VMs if v.Pool == "web")
    group = naming.schedule_group_name(scheduled)

    stop = aws.scheduler.get_schedule(Name="demo-fixed-web-stop", GroupName=group)
    assert json.loads(stop["Target"]["Input"]) == {"InstanceIds": web_ids}
    assert stop["Target"]["RoleArn"] == ids.SchedulerRoleArn
    role = naming.scheduler_role_name(scheduled)
    doc = aws.iam.get_role_policy(RoleName=role, PolicyName=scheduler_role.POLICY_NAME)["PolicyDocument"]
    assert doc["Statement"][0]["Action"] == ["ec2:StartInstances", "ec2:StopInstances"]
    actions = aws.autoscaling.describe_scheduled_actions(AutoScalingGroupName="vmplane-acme-demo-fixed-batch")
    assert sorted(a["ScheduledActionName"] for a in actions["ScheduledUpdateGroupActions"]) == [
        "vmplane-acme-demo-fixed-batch-start",
        "vmplane-acme-demo-fixed-batch-stop",
    ]

    # The schedule stops a VM (as EventBridge would): the next apply records it stopped, launches no
    # replacement and does not wait for it.
    first = web_ids[0]
    aws.ec2.stop_instances(InstanceIds=[first])
    driver.pools.ensure_vms(ctx)
    assert {v.ID: v.State for v in ctx.infra.VMs}[first] is VMState.stopped
    assert sorted(v.ID for v in ctx.infra.VMs if v.Pool == "web") == web_ids

    # Stop: the Fixed VMs stopped and recorded so, the group at 0, the schedules paused.
    driver.pools.stop(ctx, "web")
    driver.pools.stop(ctx, "batch")
    driver.pools.stop(ctx, "web")  # idempotent
    states = aws.ec2.describe_instances(InstanceIds=web_ids)["Reservations"]
    assert {i["State"]["Name"] for r in states for i in r["Instances"]} == {"stopped"}
    assert {v.State for v in ctx.infra.VMs if v.Pool == "web"} == {VMState.stopped}
    assert not [v for v in ctx.infra.VMs if v.Pool == "batch"] and ctx.infra.StoppedPools == ["batch", "web"]
    grp = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["vmplane-acme-demo-fixed-batch"])
    g = grp["AutoScalingGroups"][0]
    assert (g["MinSize"], g["DesiredCapacity"], g["MaxSize"], g["Instances"]) == (0, 0, 3, [])
    assert [p["ProcessName"] for p in g["SuspendedProcesses"]] == ["ScheduledActions"]
    assert aws.scheduler.get_schedule(Name="demo-fixed-web-start", GroupName=group)["State"] == "DISABLED"

    # An apply keeps them stopped: nothing started, nothing sized up, no stopped VM waited for.
    driver.pools.ensure_vms(ctx)
    driver.scheduler.ensure(ctx)
    states = aws.ec2.describe_instances(InstanceIds=web_ids)["Reservations"]
    assert {i["State"]["Name"] for r in states for i in r["Instances"]} == {"stopped"}
    grp = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["vmplane-acme-demo-fixed-batch"])
    assert grp["AutoScalingGroups"][0]["DesiredCapacity"] == 0

    # Start: running and ready again, the group at the pool's sizes, the schedules resumed.
    driver.pools.start(ctx, "web")
    driver.pools.start(ctx, "batch")
    assert ctx.infra.StoppedPools == []
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready} and len(ctx.infra.VMs) == 4
    grp = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["vmplane-acme-demo-fixed-batch"])
    assert grp["AutoScalingGroups"][0]["SuspendedProcesses"] == []
    assert aws.scheduler.get_schedule(Name="demo-fixed-web-start", GroupName=group)["State"] == "ENABLED"

    # A changed schedule updates the same resources in place; a removed one deletes them (and the role).
    later = variant(scheduled, pools={"web": {"schedule": {**BERLIN, "stop": "20:30"}}})
    ctx.spec = later
    driver.scheduler.ensure(ctx)
    assert (
        aws.scheduler.get_schedule(Name="demo-fixed-web-stop", GroupName=group)["ScheduleExpression"]
        == "cron(30 20 ? * MON,TUE,WED,THU,FRI *)"
    )
    assert aws.scheduler.get_schedule(Name="demo-fixed-web-stop", GroupName=group)["Arn"] == stop["Arn"]
    doc = scheduled.model_dump(mode="json", by_alias=True, exclude_none=True)
    for p in doc["pools"].values():
        p.pop("schedule")
    ctx.spec = EnvSpec.model_validate(doc)
    driver.scheduler.ensure(ctx)
    assert aws.autoscaling.describe_scheduled_actions()["ScheduledUpdateGroupActions"] == []
    assert [g["Name"] for g in aws.scheduler.list_schedule_groups()["ScheduleGroups"]] == ["default"]
    assert role not in {r["RoleName"] for r in aws.iam.list_roles()["Roles"]}
    assert not ids.Schedules and not ids.ScheduledActions and ids.SchedulerRoleArn is None

    # Teardown finds everything by name and tag, even with the record lost (after a re-tag, which
    # reaches the scheduler's role and schedule group too).
    ctx.spec = scheduled
    create_identity(driver, ctx)
    driver.scheduler.ensure(ctx)
    ctx.spec = scheduled.model_copy(update={"tags": {"team": "ops"}})
    driver.inventory.retag(ctx)
    group_arn = aws.scheduler.get_schedule_group(Name=group)["Arn"]
    for tags in (
        aws.scheduler.list_tags_for_resource(ResourceArn=group_arn)["Tags"],
        aws.iam.list_role_tags(RoleName=role)["Tags"],
    ):
        assert {t["Key"]: t["Value"] for t in tags if not t["Key"].startswith("zop:")} == {"team": "ops", "Name": ANY}
    kinds = {lo.kind for lo in driver.inventory.leftovers(ctx)}
    assert {"scheduled-action", "schedule", "schedule-group"} <= kinds
    lost = make_ctx(scheduled, ctx.infra.model_copy(update={"Cloud": aws_ids(ctx.infra).model_copy()}))
    lost_ids = aws_ids(lost.infra)
    lost_ids.ScheduledActions, lost_ids.Schedules, lost_ids.ScheduleGroupName = {}, {}, None
    lost_ids.SchedulerRoleName = lost_ids.SchedulerRoleArn = None
    for step in (
        driver.scheduler.delete,
        driver.pools.delete_vms,
        driver.pools.delete_templates,
        driver.network.delete_firewall,
        partial(delete_identity, driver),
        driver.network.delete,
    ):
        step(lost)
    assert driver.inventory.leftovers(lost) == []
    aws = driver.aws
    assert aws.autoscaling.describe_scheduled_actions()["ScheduledUpdateGroupActions"] == []
    assert aws.scheduler.list_schedules()["Schedules"] == []


def test_start_sizes_a_stopped_group_up_even_outside_its_hours(aws_iam, scheduled: EnvSpec) -> None:
    """`vmplane start` at night runs the pool until its schedule's next stop; an apply at night keeps a
    group the schedule took to 0 there (the clock is pinned: the answer must not depend on when CI runs)."""
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = _provision(driver, scheduled)
    driver.pools.stop(ctx, "batch")
    pool = scheduled.pools["batch"]
    assert isinstance(pool, AsgPool)
    night = datetime(2026, 12, 2, 22, 0, tzinfo=UTC)  # a Wednesday, 23:00 in Berlin
    name = "vmplane-acme-demo-fixed-batch"

    def sizes() -> tuple[int, int]:
        g = driver.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
        return g["MinSize"], g["DesiredCapacity"]

    ctx.infra.StoppedPools = []  # as if the schedule, not `vmplane stop`, had taken it to 0
    ensure_asg_pool(driver.aws, ctx, "batch", pool, now=night)
    assert sizes() == (0, 0)
    ensure_asg_pool(driver.aws, ctx, "batch", pool, starting=True, now=night)
    assert sizes() == (1, 2)
    assert len([v for v in ctx.infra.VMs if v.Pool == "batch"]) == 2
