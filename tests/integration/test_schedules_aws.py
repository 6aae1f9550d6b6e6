"""Pool schedules on the sandbox, through the real CLI, read back with boto3 (not vmplane's records):
an ASG pool's scheduled actions and a Fixed pool's EventBridge schedules with their role; a changed
schedule updates the same resources in place; stop and start act on EC2 and the group at once;
destroy leaves none of it.

moto stores scheduled actions and EventBridge schedules and never fires them, so nothing here sees
a pool stop at 19:00: what is checked is what the schedulers were told (expression, zone, target,
the exact instance ids), and `vmplane stop`/`start`, which act at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.sweep_inventory import inventory, remaining

from vmplane.clouds.aws import naming
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.session import AwsTarget
from vmplane.envspec.models import EnvSpec
from vmplane.pipeline.plan import provision_plan
from vmplane.state import InfraConfig

NAME = "itest-sched"
GROUP = f"vmplane-acme-{NAME}-batch"  # the ASG
SCHEDULES = f"vmplane-acme-{NAME}-schedules"  # the EventBridge schedule group
ROLE = f"vmplane-acme-{NAME}-scheduler"
BERLIN = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
SCHEDULE_KINDS = {"aws_autoscaling_schedule", "aws_scheduler_schedule", "aws_scheduler_schedule_group"}


def _pools(schedule: dict[str, str]) -> dict[str, Any]:
    return {
        "web": {"mode": "fixed", "size": 2, "schedule": schedule},
        "batch": {"mode": "asg", "min": 1, "max": 2, "desired": 1, "schedule": schedule},
    }


def instance_states(sb: Sandbox, job_id: str, name_prefix: str) -> dict[str, str]:
    f = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    res = sb.client("ec2").describe_instances(Filters=f)["Reservations"]
    out = {}
    for inst in (i for r in res for i in r["Instances"]):
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        if tags.get("Name", "").startswith(name_prefix) and inst["State"]["Name"] != "terminated":
            out[inst["InstanceId"]] = inst["State"]["Name"]
    return out


def sweep_view(sb: Sandbox, job_id: str, spec: EnvSpec) -> dict[str, Any]:
    """The crash sweep's normalised inventory of the environment (it must see the schedules too)."""
    domain, lb = f"{NAME}.sandbox.vmplane.test", naming.lb_base_name(spec)
    return inventory(sb, job_id=job_id, org=spec.org, name=spec.name, domain=domain, lb_name=lb)


def actions(sb: Sandbox) -> dict[str, dict[str, Any]]:
    found = sb.client("autoscaling").describe_scheduled_actions(AutoScalingGroupName=GROUP)
    return {a["ScheduledActionName"]: a for a in found["ScheduledUpdateGroupActions"]}


def group_sizes(sb: Sandbox) -> tuple[int, int, int, int]:
    g = sb.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    return g["MinSize"], g["DesiredCapacity"], g["MaxSize"], len(g["Instances"])


@pytest.mark.sandbox
@pytest.mark.slow
def test_schedules_apply_update_stop_start_destroy(cli: Cli, sandbox: Sandbox, tmp_path: Path) -> None:
    env_file = write_env(tmp_path, NAME, pools=_pools(BERLIN))
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    job_id = job["id"]
    scheduler, iam = sandbox.client("scheduler"), sandbox.client("iam")
    web = sorted(instance_states(sandbox, job_id, f"{NAME}-web-"))
    assert len(web) == 2

    # ASG pool: scale to 0 at 19:00, back to the pool's sizes at 08:00, Berlin time.
    acts = actions(sandbox)
    stop, start = acts[f"{GROUP}-stop"], acts[f"{GROUP}-start"]
    assert (stop["Recurrence"], stop["TimeZone"]) == ("0 19 * * 1,2,3,4,5", "Europe/Berlin")
    assert (stop["MinSize"], stop["DesiredCapacity"], stop.get("MaxSize")) == (0, 0, None)
    assert (start["Recurrence"], start["MinSize"], start["DesiredCapacity"], start["MaxSize"]) == (
        "0 8 * * 1,2,3,4,5",
        1,
        1,
        2,
    )

    # Fixed pool: EventBridge schedules whose universal targets name exactly the pool's instances.
    role_arn = iam.get_role(RoleName=ROLE)["Role"]["Arn"]
    created = {}
    for kind in ("start", "stop"):
        s = scheduler.get_schedule(Name=f"{NAME}-web-{kind}", GroupName=SCHEDULES)
        hour = "8" if kind == "start" else "19"
        assert s["ScheduleExpression"] == f"cron(0 {hour} ? * MON,TUE,WED,THU,FRI *)"
        assert s["ScheduleExpressionTimezone"] == "Europe/Berlin" and s["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert s["Target"]["Arn"] == f"arn:aws:scheduler:::aws-sdk:ec2:{kind}Instances"
        assert json.loads(s["Target"]["Input"]) == {"InstanceIds": web}
        assert s["Target"]["RoleArn"] == role_arn and s["State"] == "ENABLED"
        created[kind] = s["CreationDate"]
    group_arn = scheduler.get_schedule_group(Name=SCHEDULES)["Arn"]
    tags = {t["Key"]: t["Value"] for t in scheduler.list_tags_for_resource(ResourceArn=group_arn)["Tags"]}
    assert tags["zop:jobId"] == job_id and tags["zop:managedBy"] == "vmplane"

    # The role: assumed by EventBridge Scheduler for this account only, allowed to start/stop this job's VMs.
    trust = iam.get_role(RoleName=ROLE)["Role"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert trust[0]["Condition"]["StringEquals"] == {"aws:SourceAccount": job["config"]["infra"]["Cloud"]["AccountID"]}
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == ["vmplane-start-stop-instances"]
    assert iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"] == []
    (allow,) = iam.get_role_policy(RoleName=ROLE, PolicyName="vmplane-start-stop-instances")["PolicyDocument"][
        "Statement"
    ]
    assert allow["Action"] == ["ec2:StartInstances", "ec2:StopInstances"]
    assert allow["Condition"] == {"StringEquals": {"aws:ResourceTag/zop:jobId": job_id}}

    # The plan names what the sandbox holds.
    spec, infra = EnvSpec.model_validate(job["config"]["spec"]), InfraConfig.model_validate(job["config"]["infra"])
    plan = provision_plan(AwsDriver(AwsTarget(region="us-east-1", endpoint_url=sandbox.endpoint)), spec, infra, "sb")
    planned = {(r.type, r.name) for r in plan.resources if r.type in SCHEDULE_KINDS or r.name == ROLE}
    listed = scheduler.list_schedules(GroupName=SCHEDULES)["Schedules"]
    held = {("aws_autoscaling_schedule", n) for n in acts} | {("aws_iam_role", ROLE)}
    held |= {("aws_scheduler_schedule", s["Name"]) for s in listed} | {("aws_scheduler_schedule_group", SCHEDULES)}
    assert planned == held
    seen = sweep_view(sandbox, job_id, spec)
    assert [len(seen[k]) for k in ("scheduled_actions", "schedule_groups", "schedules")] == [2, 1, 2]

    # Stop now: the Fixed pool's instances stopped, the group at 0 VMs, their schedules paused.
    done = cli.json("stop", NAME, "--yes")["config"]
    assert done["operation"]["status"] == "succeeded", done["operation"]
    assert set(instance_states(sandbox, job_id, f"{NAME}-web-").values()) == {"stopped"}
    assert group_sizes(sandbox) == (0, 0, 2, 0)
    assert done["infra"]["StoppedPools"] == ["batch", "web"]

    # A changed schedule while stopped: the same resources updated in place (still paused), and the
    # update keeps the pools stopped (nothing started, the group not sized up).
    later = {**BERLIN, "timezone": "America/New_York", "stop": "20:30"}
    env_file = write_env(tmp_path, NAME, pools=_pools(later))
    updated = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert updated["status"] == "succeeded", updated["error"]
    acts = actions(sandbox)
    assert sorted(acts) == [f"{GROUP}-start", f"{GROUP}-stop"]
    assert (acts[f"{GROUP}-stop"]["Recurrence"], acts[f"{GROUP}-stop"]["TimeZone"]) == (
        "30 20 * * 1,2,3,4,5",
        "America/New_York",
    )
    assert len(scheduler.list_schedules(GroupName=SCHEDULES)["Schedules"]) == 2
    for kind in ("start", "stop"):
        s = scheduler.get_schedule(Name=f"{NAME}-web-{kind}", GroupName=SCHEDULES)
        assert s["CreationDate"] == created[kind] and s["ScheduleExpressionTimezone"] == "America/New_York"
        assert s["State"] == "DISABLED"
    stop_expr = scheduler.get_schedule(Name=f"{NAME}-web-stop", GroupName=SCHEDULES)["ScheduleExpression"]
    assert stop_expr == "cron(30 20 ? * MON,TUE,WED,THU,FRI *)"
    assert set(instance_states(sandbox, job_id, f"{NAME}-web-").values()) == {"stopped"}
    assert group_sizes(sandbox) == (0, 0, 2, 0)

    # Start: running again (the same instances, checked ready), the group at the pool's sizes.
    done = cli.json("start", NAME, "--yes")["config"]
    assert instance_states(sandbox, job_id, f"{NAME}-web-") == dict.fromkeys(web, "running")
    assert group_sizes(sandbox) == (1, 1, 2, 1)
    assert scheduler.get_schedule(Name=f"{NAME}-web-start", GroupName=SCHEDULES)["State"] == "ENABLED"
    assert done["operation"]["status"] == "succeeded", done["operation"]
    assert {v["State"] for v in done["infra"]["VMs"]} == {"ready"}
    assert done["infra"]["StoppedPools"] == []

    # Destroy: no scheduled action, schedule, schedule group or scheduler role left.
    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert actions(sandbox) == {}
    assert not [s for s in scheduler.list_schedules()["Schedules"] if s["GroupName"] == SCHEDULES]
    assert SCHEDULES not in {g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"]}
    assert ROLE not in {r["RoleName"] for r in iam.list_roles()["Roles"]}
    assert not remaining(sweep_view(sandbox, job_id, spec))
