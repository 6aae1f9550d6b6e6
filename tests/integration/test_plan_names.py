"""The plan `vmplane plan` shows names every resource exactly as `apply` then creates it: both come
from the driver's naming functions (clouds/aws/naming.py). Checked against what the sandbox holds."""

from __future__ import annotations

from collections import defaultdict

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.session import AwsTarget
from vmplane.envspec.models import EnvSpec
from vmplane.pipeline.plan import provision_plan
from vmplane.state import InfraConfig

# Plan types whose created resources carry a name to compare (rules, attachments and listeners have none).
NAMED = {
    "aws_vpc",
    "aws_internet_gateway",
    "aws_subnet",
    "aws_eip",
    "aws_nat_gateway",
    "aws_route_table",
    "aws_iam_role",
    "aws_iam_instance_profile",
    "aws_security_group",
    "aws_launch_template",
    "aws_instance",
    "aws_autoscaling_group",
    "aws_lb",
    "aws_lb_target_group",
    "aws_acm_certificate",
    "aws_route53_record",
}


def _name(item: dict) -> str | None:
    return next((t["Value"] for t in item.get("Tags", []) if t["Key"] == "Name"), None)


def created_names(sb: Sandbox, job_id: str, infra: InfraConfig, domain: str) -> dict[str, set[str]]:
    ec2, iam, elb, acm, r53 = (sb.client(s) for s in ("ec2", "iam", "elbv2", "acm", "route53"))
    f = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    out: dict[str, set[str]] = defaultdict(set)
    scaled = {v.ID for v in infra.VMs if v.Pool in infra.ScalingGroupID}
    out["aws_autoscaling_group"] = {
        g["AutoScalingGroupName"]
        for g in sb.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        if any(t["Key"] == "zop:jobId" and t["Value"] == job_id for t in g.get("Tags", []))
    }
    tagged = {
        "aws_vpc": ec2.describe_vpcs(Filters=f)["Vpcs"],
        "aws_internet_gateway": ec2.describe_internet_gateways(Filters=f)["InternetGateways"],
        "aws_subnet": ec2.describe_subnets(Filters=f)["Subnets"],
        "aws_eip": ec2.describe_addresses(Filters=f)["Addresses"],
        "aws_nat_gateway": [
            n
            for n in ec2.describe_nat_gateways(Filters=f)["NatGateways"]
            if any(t["Key"] == "zop:jobId" and t["Value"] == job_id for t in n.get("Tags", []))
        ],
        # The VPC's main table is tagged too (vpc-default) but is the VPC's, not a planned resource.
        "aws_route_table": [
            rt
            for rt in ec2.describe_route_tables(Filters=f)["RouteTables"]
            if not any(a.get("Main") for a in rt.get("Associations", []))
        ],
        # Fixed-pool instances (the plan lists an ASG, not the instances the ASG launches).
        "aws_instance": [
            i
            for r in ec2.describe_instances(Filters=[*f, {"Name": "instance-state-name", "Values": ["running"]}])[
                "Reservations"
            ]
            for i in r["Instances"]
            if i["InstanceId"] not in scaled
        ],
    }
    for kind, items in tagged.items():
        out[kind] = {n for n in map(_name, items) if n}
    out["aws_security_group"] = {
        g["GroupName"] for g in ec2.describe_security_groups(Filters=f)["SecurityGroups"] if g["GroupName"] != "default"
    }
    out["aws_launch_template"] = {
        t["LaunchTemplateName"] for t in ec2.describe_launch_templates(Filters=f)["LaunchTemplates"]
    }
    roles = iam.list_roles()["Roles"]
    out["aws_iam_role"] = {
        r["RoleName"]
        for r in roles
        if any(t["Value"] == job_id for t in iam.list_role_tags(RoleName=r["RoleName"])["Tags"])
    }
    out["aws_iam_instance_profile"] = {
        p["InstanceProfileName"]
        for p in iam.list_instance_profiles()["InstanceProfiles"]
        if any(t["Value"] == job_id for t in p.get("Tags", []))
    }
    lb = elb.describe_load_balancers(LoadBalancerArns=[infra.LoadBalancerID])["LoadBalancers"][0]
    out["aws_lb"] = {lb["LoadBalancerName"]}
    tgs = elb.describe_target_groups(LoadBalancerArn=infra.LoadBalancerID)["TargetGroups"]
    out["aws_lb_target_group"] = {t["TargetGroupName"] for t in tgs}
    out["aws_acm_certificate"] = {
        c["DomainName"] for c in acm.list_certificates()["CertificateSummaryList"] if c["DomainName"] == domain
    }
    zone = next(z["Id"] for z in r53.list_hosted_zones()["HostedZones"] if domain.endswith(z["Name"].rstrip(".")))
    records = r53.list_resource_record_sets(HostedZoneId=zone)["ResourceRecordSets"]
    out["aws_route53_record"] = {r["Name"].rstrip(".") for r in records if r["Type"] == "A"} & {domain}
    return out


@pytest.mark.sandbox
def test_planned_names_are_the_created_names(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    # A Fixed pool and an ASG pool behind the LB: every kind of resource the driver can create.
    env_file = write_env(
        tmp_path,
        "itest-names",
        pools={
            "web": {"mode": "fixed", "size": 2},
            "batch": {"mode": "asg", "min": 1, "max": 2, "desired": 1},
        },
        loadBalancer={"domain": "itest-names.sandbox.vmplane.test"},
    )
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    spec = EnvSpec.model_validate(job["config"]["spec"])
    infra = InfraConfig.model_validate(job["config"]["infra"])
    driver = AwsDriver(AwsTarget(region="us-east-1", endpoint_url=sandbox.endpoint))
    plan = provision_plan(driver, spec, infra, "sandbox")

    planned: dict[str, set[str]] = defaultdict(set)
    for r in plan.resources:
        if r.type in NAMED:
            planned[r.type].add(r.name)
    created = created_names(sandbox, job["id"], infra, "itest-names.sandbox.vmplane.test")
    for kind in sorted(NAMED):
        assert planned[kind] == created[kind], kind

    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
