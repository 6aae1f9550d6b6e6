"""AWS in the driver contract: the moto sandbox (`vmplane sandbox`), examples/web.jsonc (an ASG behind an
HTTPS LB) for the crash sweep under tests/fixtures/faults/sweep.jsonc (killed runs resume through
not-yet-visible ids and throttling, as on the real cloud), and two repair scenarios on the session sandbox
drifted with boto3: examples/fixed.jsonc (a VM terminated and one stopped, a rule added to the default group
and one of vmplane's revoked, a tag removed, the NAT route deleted, a stray group carrying the job's tags)
and examples/web.jsonc (the HTTPS listener deleted, a target deregistered, the scaling group's launch
template deleted). The inventory is tests/integration/sweep_inventory.py (every kind, normalised)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.contract.adapter import RepairEnv, SandboxAdapter
from tests.helpers import Sandbox
from tests.integration.sweep_inventory import inventory, remaining

from vmplane.clouds.aws import naming
from vmplane.envspec.load import load_spec

MUTATING = re.compile(
    r"^(Create|Delete|Modify|Put|Attach|Detach|Associate|Disassociate|Authorize|Revoke|Register|Deregister"
    r"|Request|Change|Run|Update|Add|Remove|Set|Start|Stop|Terminate|Allocate|Release|Tag|Untag|Send|Replace"
    r"|Enable|Disable|Import|Upload|Reboot)"
)
# Calls every reconcile of the repair examples makes whether anything drifted or not (IAM's create-or-adopt,
# the VPC's attributes, the LB's and target group's attributes, the scaling policy, the DNS upsert, the
# sentinel check): killed after each by the crash sweep, resumed the same way, so no repair case of their own.
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


def _lb_arn(sb: Sandbox, env: str) -> str:
    lbs = sb.client("elbv2").describe_load_balancers()["LoadBalancers"]
    return str(next(x["LoadBalancerArn"] for x in lbs if x["LoadBalancerName"].startswith(env)))


def drift_web(sb: Sandbox, job_id: str, env: str) -> None:
    elb, ec2, asg = sb.client("elbv2"), sb.client("ec2"), sb.client("autoscaling")
    https = next(x for x in elb.describe_listeners(LoadBalancerArn=_lb_arn(sb, env))["Listeners"] if x["Port"] == 443)
    elb.delete_listener(ListenerArn=https["ListenerArn"])
    tg = next(
        a["TargetGroupArn"]
        for a in elb.describe_target_groups()["TargetGroups"]
        if a["TargetGroupName"].startswith(env)
    )
    member = elb.describe_target_health(TargetGroupArn=tg)["TargetHealthDescriptions"][0]["Target"]["Id"]
    elb.deregister_targets(TargetGroupArn=tg, Targets=[{"Id": member}])
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[f"vmplane-acme-{env}-web"])["AutoScalingGroups"][0]
    ec2.delete_launch_template(LaunchTemplateId=group["LaunchTemplate"]["LaunchTemplateId"])


def check_web(sb: Sandbox, job_id: str, env: str) -> None:
    listeners = sb.client("elbv2").describe_listeners(LoadBalancerArn=_lb_arn(sb, env))["Listeners"]
    assert sorted(x["Port"] for x in listeners) == [80, 443]
    templates = sb.client("ec2").describe_launch_templates(Filters=job_filter(job_id, "launch-template"))
    assert len(templates["LaunchTemplates"]) == 1


Scenario = tuple[str, Callable[[Sandbox, str, str], None], Callable[[Sandbox, str, str], None]]
SCENARIOS: dict[str, Scenario] = {
    "fixed": ("fixed.jsonc", drift_fixed, check_fixed),
    "web": ("web.jsonc", drift_web, check_web),
}


class AwsAdapter(SandboxAdapter):
    name = "aws"
    marks = (pytest.mark.sandbox, pytest.mark.slow)
    EXAMPLE = "web.jsonc"
    REPAIR_EXAMPLES = {scenario: example for scenario, (example, _, _) in SCENARIOS.items()}
    FAULTS = ("aws.throttle", "aws.visibility")
    RESUME_REPAIR_WITH_RESUME = True
    CHECK_FOUND_EACH_CASE = True
    APPLY_OPS = [
        "AddRoleToInstanceProfile",
        "AllocateAddress",
        "AssociateRouteTable",
        "AttachInternetGateway",
        "AttachLoadBalancerTargetGroups",
        "AttachRolePolicy",
        "AuthorizeSecurityGroupIngress",
        "ChangeResourceRecordSets",
        "CreateAutoScalingGroup",
        "CreateInstanceProfile",
        "CreateInternetGateway",
        "CreateLaunchTemplate",
        "CreateListener",
        "CreateLoadBalancer",
        "CreateNatGateway",
        "CreateRole",
        "CreateRoute",
        "CreateRouteTable",
        "CreateSecurityGroup",
        "CreateSubnet",
        "CreateTags",
        "CreateTargetGroup",
        "CreateVpc",
        "ModifyLoadBalancerAttributes",
        "ModifyTargetGroupAttributes",
        "ModifyVpcAttribute",
        "PutScalingPolicy",
        "RequestCertificate",
        "RevokeSecurityGroupEgress",
        "RevokeSecurityGroupIngress",
        "SendCommand",
        "UpdateAutoScalingGroup",
    ]
    # Teardown steps run one after another, so "the first call in a later step" is a fixed `#N`.
    DESTROY_OPS = [
        "ChangeResourceRecordSets",
        "DeleteAutoScalingGroup",
        "DeleteCertificate",
        "DeleteInstanceProfile",
        "DeleteInternetGateway",
        "DeleteLaunchTemplate",
        "DeleteListener",
        "DeleteLoadBalancer",
        "DeleteNatGateway",
        "DeleteRole",
        "DeleteRouteTable",
        "DeleteSecurityGroup",
        "DeleteSecurityGroup#2",
        "DeleteSubnet",
        "DeleteTargetGroup",
        "DeleteVpc",
        "DetachInternetGateway",
        "DetachLoadBalancerTargetGroups",
        "DetachRolePolicy",
        "DisassociateAddress",
        "DisassociateRouteTable",
        "ReleaseAddress",
        "RemoveRoleFromInstanceProfile",
        "RevokeSecurityGroupIngress",
        "UpdateAutoScalingGroup",
    ]
    REPAIR_OPS = {
        "fixed": [
            "AuthorizeSecurityGroupIngress",
            "CreateRoute",
            "CreateTags",
            "DeleteSecurityGroup",
            "RevokeSecurityGroupIngress",
            "RunInstances",
            "StartInstances",
        ],
        "web": ["CreateLaunchTemplate", "CreateListener", "CreateTags", "RegisterTargets", "UpdateAutoScalingGroup"],
    }

    def case(self, op: str) -> str | None:
        """`ec2.CreateVpc` -> `CreateVpc` when it mutates (the hook names AWS operations without the service)."""
        name = op.split(".", 1)[1]
        return name if MUTATING.match(name) else None

    def snapshot(self, emu: Any, env_file: Path, job_id: str) -> dict[str, Any]:
        spec = load_spec(env_file)
        assert spec.load_balancer is not None
        return inventory(
            emu, job_id=job_id, org=spec.org, name=spec.name, domain=spec.load_balancer.domain,
            lb_name=naming.lb_base_name(spec),
        )  # fmt: skip

    def remaining(self, snap: dict[str, Any]) -> dict[str, Any]:
        return remaining(snap)

    def make_drift(self, scenario: str, env: RepairEnv) -> None:
        SCENARIOS[scenario][1](env.emu, env.job_id, env.name)

    def check_repaired(self, scenario: str, env: RepairEnv) -> None:
        SCENARIOS[scenario][2](env.emu, env.job_id, env.name)
        # The record follows: the VM made again is recorded with its new id, through readiness.
        vms = env.cli.json("status", env.name)["config"]["infra"]["VMs"]
        assert vms and all(v["State"] == "ready" for v in vms), vms

    def repair_ops(self, job: dict[str, Any]) -> list[str]:
        """Every distinct mutating call of the repair operation but those every reconcile makes."""
        steps = job["config"]["operation"]["steps"]
        names = {op.split(".", 1)[1] for s in steps for op in s["apiCalls"]}
        return sorted(n for n in names if MUTATING.match(n) and n not in EVERY_RECONCILE)
