"""The repair path's crash sweep: an applied environment is made to drift out of band (boto3), then the
`vmplane apply` that repairs it is killed -9 right after each distinct mutating AWS call of the repair
operation (stepRepairDrift's fixes, then the provisioning steps that make again what it forgot), and
`vmplane resume` must converge: the operation succeeds, `vmplane drift` is clean, and nothing was made
twice (one live VM per name, one listener per port).

Two drift scenarios: examples/fixed.jsonc (a VM terminated and one stopped, a rule added to the default
group and one of vmplane's revoked, a tag removed, the NAT route deleted, a stray group carrying the
job's tags) and examples/web.jsonc (the HTTPS listener deleted, a target deregistered, the scaling
group's launch template deleted). The kill points below are the clean reference repair's calls (the
operation's per-step API tally, less what every reconcile calls: `EVERY_RECONCILE`);
`test_the_sweep_covers_every_mutating_call` fails, printing the lists to paste, when they drift from the code.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, module_env_name, write_env
from tests.integration.test_crash_resume import kill_after

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

MUTATING = re.compile(
    r"^(Create|Delete|Modify|Put|Attach|Detach|Associate|Disassociate|Authorize|Revoke|Register|Deregister"
    r"|Request|Change|Run|Update|Add|Remove|Set|Start|Stop|Terminate|Allocate|Release|Tag|Untag|Send|Replace)"
)
FIXED_OPS = [
    "AuthorizeSecurityGroupIngress",
    "CreateRoute",
    "CreateTags",
    "DeleteSecurityGroup",
    "RevokeSecurityGroupIngress",
    "RunInstances",
    "StartInstances",
]
WEB_OPS = ["CreateLaunchTemplate", "CreateListener", "CreateTags", "RegisterTargets", "UpdateAutoScalingGroup"]
# Calls every reconcile of these examples makes whether anything drifted or not (IAM's create-or-adopt,
# the VPC's attributes, the LB's and target group's attributes, the scaling policy, the DNS upsert, the
# sentinel check): killed after each by the crash sweep (test_crash_sweep.py), resumed the same way.
EVERY_RECONCILE = {
    "ChangeResourceRecordSets",
    "CreateInstanceProfile",
    "CreateRole",
    "ModifyLoadBalancerAttributes",
    "ModifyTargetGroupAttributes",
    "ModifyVpcAttribute",
    "PutScalingPolicy",
    "SendCommand",
}


def job_filter(job_id: str, role: str | None = None) -> list[dict[str, Any]]:
    f: list[dict[str, Any]] = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    return f + ([{"Name": "tag:zop:role", "Values": [role]}] if role else [])


def live_names(sb: Sandbox, job_id: str) -> Counter[str]:
    """Live VMs by name (a VM made twice shows as 2)."""
    res = sb.client("ec2").describe_instances(
        Filters=[
            *job_filter(job_id, "vm"),
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
        ]
    )["Reservations"]
    return Counter(next(t["Value"] for t in i["Tags"] if t["Key"] == "Name") for r in res for i in r["Instances"])


def drift_fixed(sb: Sandbox, job_id: str, env: str) -> None:
    ec2 = sb.client("ec2")
    res = ec2.describe_instances(
        Filters=[*job_filter(job_id, "vm"), {"Name": "instance-state-name", "Values": ["running"]}]
    )["Reservations"]
    vms = {
        next(t["Value"] for t in i["Tags"] if t["Key"] == "Name"): i["InstanceId"] for r in res for i in r["Instances"]
    }
    ec2.terminate_instances(InstanceIds=[vms[f"{env}-web-0"]])
    ec2.stop_instances(InstanceIds=[vms[f"{env}-web-1"]])
    vpc = ec2.describe_vpcs(Filters=job_filter(job_id, "vpc"))["Vpcs"][0]["VpcId"]
    default = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"][0]["GroupId"]
    world_ssh = {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
    ec2.authorize_security_group_ingress(GroupId=default, IpPermissions=[world_ssh])
    vm_group = ec2.describe_security_groups(Filters=job_filter(job_id, "vm-sg"))["SecurityGroups"][0]
    ec2.revoke_security_group_ingress(GroupId=vm_group["GroupId"], IpPermissions=vm_group["IpPermissions"])
    ec2.delete_tags(Resources=[vpc], Tags=[{"Key": "team"}])
    private = ec2.describe_route_tables(Filters=job_filter(job_id, "rt-private"))["RouteTables"][0]
    ec2.delete_route(RouteTableId=private["RouteTableId"], DestinationCidrBlock="0.0.0.0/0")
    ec2.create_security_group(
        GroupName=f"{env}-stray",
        Description="made by hand",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [{"Key": "zop:jobId", "Value": job_id}]}],
    )


def check_fixed(sb: Sandbox, job_id: str, env: str) -> None:
    assert live_names(sb, job_id) == Counter({f"{env}-web-0": 1, f"{env}-web-1": 1})


def drift_web(sb: Sandbox, job_id: str, env: str) -> None:
    elb, ec2, asg = sb.client("elbv2"), sb.client("ec2"), sb.client("autoscaling")
    spec_name = f"vmplane-acme-{env}-web"
    lb_arn = next(
        x["LoadBalancerArn"]
        for x in elb.describe_load_balancers()["LoadBalancers"]
        if x["LoadBalancerName"].startswith(env)
    )
    https = next(x for x in elb.describe_listeners(LoadBalancerArn=lb_arn)["Listeners"] if x["Port"] == 443)
    elb.delete_listener(ListenerArn=https["ListenerArn"])
    tg = next(
        a["TargetGroupArn"]
        for a in elb.describe_target_groups()["TargetGroups"]
        if a["TargetGroupName"].startswith(env)
    )
    member = elb.describe_target_health(TargetGroupArn=tg)["TargetHealthDescriptions"][0]["Target"]["Id"]
    elb.deregister_targets(TargetGroupArn=tg, Targets=[{"Id": member}])
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[spec_name])["AutoScalingGroups"][0]
    ec2.delete_launch_template(LaunchTemplateId=group["LaunchTemplate"]["LaunchTemplateId"])


def check_web(sb: Sandbox, job_id: str, env: str) -> None:
    elb = sb.client("elbv2")
    lb_arn = next(
        x["LoadBalancerArn"]
        for x in elb.describe_load_balancers()["LoadBalancers"]
        if x["LoadBalancerName"].startswith(env)
    )
    ports = sorted(x["Port"] for x in elb.describe_listeners(LoadBalancerArn=lb_arn)["Listeners"])
    assert ports == [80, 443]
    templates = sb.client("ec2").describe_launch_templates(Filters=job_filter(job_id, "launch-template"))
    assert len(templates["LaunchTemplates"]) == 1


Scenario = tuple[str, Callable[[Sandbox, str, str], None], Callable[[Sandbox, str, str], None]]
SCENARIOS: dict[str, Scenario] = {
    "fixed": ("fixed.jsonc", drift_fixed, check_fixed),
    "web": ("web.jsonc", drift_web, check_web),
}


def drifted(cli: Cli, sb: Sandbox, tmp: Path, env: str, scenario: str) -> tuple[Path, str]:
    """An applied environment of the scenario's example, then made to drift; its file and job id."""
    example, make, _ = SCENARIOS[scenario]
    env_file = write_env(tmp, env, example=example)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    make(sb, job["id"], env)
    assert cli.json("drift", env, expect=3)["drift"]
    return env_file, str(job["id"])


def repair_ops(job: dict[str, Any]) -> list[str]:
    """Every distinct mutating call of the repair operation (its steps' tallies) but those every reconcile makes."""
    steps = job["config"]["operation"]["steps"]
    names = {op.split(".", 1)[1] for s in steps for op in s["apiCalls"]}
    return sorted(n for n in names if MUTATING.match(n) and n not in EVERY_RECONCILE)


@dataclass
class Applied:
    """A scenario's environment, applied once per test process and repaired (converged) after each case."""

    cli: Cli
    env_file: Path
    job_id: str
    env: str
    clean: bool = True  # a case sets it False when it drifts the environment, True once it checked the repair


@pytest.fixture(scope="module")
def reference(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One clean repair per scenario: the calls the kill points are checked against. Its environment, clean
    again after that repair, is what every case of the scenario drifts and repairs in turn (`applied`): a
    case needs a converged environment of the example, not a fresh one, so one apply per scenario serves
    all its kill points (each case starts from the state the previous case's checks proved clean)."""
    out: dict[str, Any] = {}
    for scenario in SCENARIOS:
        tmp = tmp_path_factory.mktemp(f"repair-ref-{scenario}")
        cli = Cli(home=tmp / "home", sandbox_port=sandbox.port)
        env = module_env_name(tmp, f"rs-ref-{scenario}")
        env_file, job_id = drifted(cli, sandbox, tmp, env, scenario)
        repaired = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert repaired["config"]["operation"]["kind"] == "repair", repaired["config"]["operation"]
        assert repaired["config"]["operation"]["status"] == "succeeded", repaired["config"]["operation"]["error"]
        assert cli.json("drift", env)["drift"] == []
        SCENARIOS[scenario][2](sandbox, job_id, env)
        out[scenario] = repair_ops(repaired)
        out[f"{scenario}:applied"] = Applied(cli, env_file, job_id, env)
    return out


@pytest.fixture
def applied(reference: dict[str, Any], sandbox: Sandbox, tmp_path: Path, scenario: str) -> Applied:
    """The scenario's shared environment when the last case left it converged (its checks passed), else (a
    case failed half-way) a fresh one, so one failure does not fail the cases after it."""
    shared: Applied = reference[f"{scenario}:applied"]
    if shared.clean:
        return shared
    cli = Cli(home=tmp_path / "home", sandbox_port=sandbox.port)
    env = f"rs-{scenario}-{tmp_path.name[-24:]}".replace("_", "-")
    env_file = write_env(tmp_path, env, example=SCENARIOS[scenario][0])
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    fresh = Applied(cli, env_file, str(job["id"]), env)
    reference[f"{scenario}:applied"] = fresh
    return fresh


def test_the_sweep_covers_every_mutating_call(reference: dict[str, Any]) -> None:
    got = (reference["fixed"], reference["web"])
    assert got == (FIXED_OPS, WEB_OPS), f"FIXED_OPS = {got[0]!r}\nWEB_OPS = {got[1]!r}"


@pytest.mark.parametrize(
    ("scenario", "op"), [("fixed", op) for op in FIXED_OPS] + [("web", op) for op in WEB_OPS], ids=lambda x: str(x)
)
def test_a_repair_killed_after_each_call_converges(applied: Applied, sandbox: Sandbox, scenario: str, op: str) -> None:
    cli, env_file, job_id, env = applied.cli, applied.env_file, applied.job_id, applied.env
    applied.clean = False
    SCENARIOS[scenario][1](sandbox, job_id, env)
    assert cli.json("drift", env, expect=3)["drift"]
    kill_after(cli, op, "apply", "-f", str(env_file), "--sandbox", "--yes")
    resumed = cli.json("resume", env)
    operation = resumed["config"]["operation"]
    assert (operation["kind"], operation["status"]) == ("repair", "succeeded"), operation.get("error")
    assert cli.json("drift", env)["drift"] == []
    SCENARIOS[scenario][2](sandbox, job_id, env)
    # The record follows: the VM made again is recorded with its new id, through readiness.
    vms = cli.json("status", env)["config"]["infra"]["VMs"]
    assert vms and all(v["State"] == "ready" for v in vms), vms
    applied.clean = True
