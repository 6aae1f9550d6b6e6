"""clouds/aws/conflicts.py on moto: every account-unique name the job would create, already taken by
someone else, fails stepValidate before anything is created; taken by this job (a resume) it does not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vmplane.clouds.aws import naming
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import DnsRecord, aws_ids
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.errors import ConflictError
from vmplane.envspec.load import load_spec

from .support import JOB_ID, REGION, ZONES, make_ctx, variant

WEB = Path(__file__).resolve().parents[2] / "examples" / "web.jsonc"
DOMAIN = "app.example.test"
OTHER = [{"Key": "zop:jobId", "Value": "tf-stack-other"}]


@pytest.fixture
def web():
    return variant(load_spec(WEB), loadBalancer={"domain": DOMAIN})


@pytest.fixture
def zone(aws):
    return aws.route53.create_hosted_zone(Name="example.test", CallerReference="z")["HostedZone"]["Id"].split("/")[-1]


def _subnets(aws) -> tuple[str, list[str]]:
    vpc = aws.ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        aws.ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.9.{i}.0/24", AvailabilityZone=z)["Subnet"]["SubnetId"]
        for i, z in enumerate(ZONES)
    ]
    return vpc, subnets


def _role(aws, spec, tags):
    aws.iam.create_role(RoleName=naming.role_name(spec), AssumeRolePolicyDocument="{}", Tags=tags)


def _profile(aws, spec, tags):
    aws.iam.create_instance_profile(InstanceProfileName=naming.role_name(spec), Tags=tags)


def _template(aws, spec, tags):
    spec_tags = [{"ResourceType": "launch-template", "Tags": tags}] if tags else []
    aws.ec2.create_launch_template(
        LaunchTemplateName=naming.launch_template_name(spec, "web"), LaunchTemplateData={}, TagSpecifications=spec_tags
    )


def _asg(aws, spec, tags):
    _, subnets = _subnets(aws)
    lt = aws.ec2.create_launch_template(LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": "ami-1"})
    name = naming.asg_name(spec, "web")
    aws.autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": lt["LaunchTemplate"]["LaunchTemplateId"]},
        MinSize=0,
        MaxSize=0,
        VPCZoneIdentifier=",".join(subnets),
        Tags=[{**t, "ResourceId": name, "ResourceType": "auto-scaling-group", "PropagateAtLaunch": True} for t in tags],
    )


def _alb(aws, spec, tags):
    _, subnets = _subnets(aws)
    aws.elbv2.create_load_balancer(Name=naming.lb_base_name(spec), Subnets=subnets, **({"Tags": tags} if tags else {}))


def _target_group(aws, spec, tags):
    vpc, _ = _subnets(aws)
    aws.elbv2.create_target_group(
        Name=naming.target_group_name(spec), Protocol="HTTP", Port=80, VpcId=vpc, **({"Tags": tags} if tags else {})
    )


def _record(aws, spec, tags, zone):
    aws.route53.change_resource_record_sets(
        HostedZoneId=zone,
        ChangeBatch={
            "Changes": [
                {
                    "Action": "CREATE",
                    "ResourceRecordSet": {
                        "Name": DOMAIN,
                        "Type": "A",
                        "TTL": 60,
                        "ResourceRecords": [{"Value": "192.0.2.1"}],
                    },
                }
            ]
        },
    )


Maker = Callable[..., None]
CASES: list[tuple[str, Maker, str]] = [
    ("role", _role, r"IAM role vmplane-acme-demo-web-vm already exists and belongs to job tf-stack-other"),
    ("profile", _profile, r"IAM instance profile vmplane-acme-demo-web-vm already exists and belongs to job tf-stack"),
    ("template", _template, r"launch template vmplane-acme-demo-web-web already exists and belongs to job tf-stack"),
    ("asg", _asg, r"auto scaling group vmplane-acme-demo-web-web already exists and belongs to job tf-stack"),
    ("alb", _alb, r"load balancer demo-web-[0-9a-f]{8} already exists and belongs to job tf-stack-other"),
    ("target-group", _target_group, r"target group demo-web-[0-9a-f]{8}-tg already exists and belongs to job tf-stack"),
]


def _snapshot(aws) -> dict[str, Any]:
    """What a job could have created, account-wide."""
    return {
        "vpcs": sorted(v["VpcId"] for v in aws.ec2.describe_vpcs()["Vpcs"]),
        "subnets": len(aws.ec2.describe_subnets()["Subnets"]),
        "nat": len(aws.ec2.describe_nat_gateways()["NatGateways"]),
        "eips": len(aws.ec2.describe_addresses()["Addresses"]),
        "groups": len(aws.ec2.describe_security_groups()["SecurityGroups"]),
        "roles": sorted(r["RoleName"] for r in aws.iam.list_roles()["Roles"]),
        "profiles": len(aws.iam.list_instance_profiles()["InstanceProfiles"]),
        "templates": len(aws.ec2.describe_launch_templates()["LaunchTemplates"]),
        "asgs": len(aws.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]),
        "elb": len(aws.elbv2.describe_load_balancers()["LoadBalancers"]),
        "tgs": len(aws.elbv2.describe_target_groups()["TargetGroups"]),
        "certs": len(aws.acm.list_certificates()["CertificateSummaryList"]),
    }


def _job_vpcs(aws) -> list[dict[str, Any]]:
    return aws.ec2.describe_vpcs(Filters=[{"Name": "tag:zop:jobId", "Values": [JOB_ID]}])["Vpcs"]


# Each name taken by another job; two also by something vmplane did not make (no job tag at all).
TAKEN = [(*c, OTHER) for c in CASES] + [(*CASES[0], []), (*CASES[4], [])]


@pytest.mark.parametrize(
    ("kind", "make", "message", "tags"), TAKEN, ids=[f"{c[0]}-{'other-job' if c[3] else 'untagged'}" for c in TAKEN]
)
def test_a_taken_name_fails_stepvalidate_and_nothing_is_created(aws, web, zone, kind, make, message, tags):
    make(aws, web, tags)
    before = _snapshot(aws)
    ctx = make_ctx(web)
    if not tags:
        message = message.split(" already exists")[0] + " already exists and belongs to something outside vmplane"
    with pytest.raises(ConflictError, match=message) as err:
        AwsDriver(AwsTarget(region=REGION)).preflight(ctx)
    assert "destroy the environment that owns them" in str(err.value)
    assert _snapshot(aws) == before
    assert _job_vpcs(aws) == []  # the LB's lookups ran beside the failing one: reads only


def test_a_record_at_the_domain_that_this_job_did_not_write_is_a_conflict(aws, web, zone):
    _record(aws, web, [], zone)
    before = _snapshot(aws)
    with pytest.raises(ConflictError, match=rf"loadBalancer.domain: .* A record for {DOMAIN} that this job did not"):
        AwsDriver(AwsTarget(region=REGION)).preflight(make_ctx(web))
    assert _snapshot(aws) == before


def test_every_taken_name_is_listed_at_once(aws, web, zone):
    for make in (_role, _profile, _template):
        make(aws, web, OTHER)
    with pytest.raises(ConflictError) as err:
        AwsDriver(AwsTarget(region=REGION)).preflight(make_ctx(web))
    assert str(err.value).count("already exists") == 3


def test_names_held_by_this_job_are_a_resume_not_a_conflict(aws, web, zone):
    mine = [{"Key": "zop:jobId", "Value": JOB_ID}]
    for _, make, _ in CASES:
        make(aws, web, mine)
    _record(aws, web, [], zone)
    ctx = make_ctx(web)
    aws_ids(ctx.infra).DNSRecords = [DnsRecord(ZoneID=zone, Name=DOMAIN, Type="A")]  # written by this job before
    AwsDriver(AwsTarget(region=REGION)).preflight(ctx)
    assert aws_ids(ctx.infra).HostedZoneID == zone
