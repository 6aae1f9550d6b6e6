"""The foundation's acceptance test, end to end on the sandbox through the real CLI.

Inspection uses independent tools: boto3 against the sandbox, the AWS CLI, and cloud-init's own
schema checker on the launch template's user-data.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

import pytest
from tests import deps_servers
from tests.helpers import Cli, Sandbox, write_env

PROVISION = [
    "stepValidate",
    "stepCreateNetwork",
    "stepCreateIAM",
    "stepCreateLaunchTemplate",
    "stepCreateVMs",
    "stepRegisterSpace",
    "stepFinalize",
]
TEARDOWN = [
    "stepDetachLoadBalancer",
    "stepTerminateVMs",
    "stepDeleteLaunchTemplate",
    "stepDeleteSecurityGroup",
    "stepDeleteIAM",
    "stepDeleteNetwork",
    "stepUnregisterSpace",
]
ZOP_KEYS = {"zop:orgId", "zop:jobId", "zop:role", "zop:managedBy"}


def tagged(resource: dict, job_id: str) -> bool:
    tags = {t["Key"]: t["Value"] for t in resource.get("Tags", [])}
    return tags.keys() >= ZOP_KEYS and tags["zop:jobId"] == job_id and tags["zop:managedBy"] == "vmplane"


def job_resources(sb: Sandbox, job_id: str) -> dict[str, list]:
    """Everything in the sandbox tagged with the job id, by kind (independent of vmplane's records)."""
    ec2, iam = sb.client("ec2"), sb.client("iam")
    f = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    out = {
        "instances": [i for r in ec2.describe_instances(Filters=f + live)["Reservations"] for i in r["Instances"]],
        "vpcs": ec2.describe_vpcs(Filters=f)["Vpcs"],
        "subnets": ec2.describe_subnets(Filters=f)["Subnets"],
        # Tags re-checked here: the sandbox ignores tag filters on DescribeNatGateways.
        "nat": [
            n
            for n in ec2.describe_nat_gateways(Filters=f)["NatGateways"]
            if n["State"] in ("pending", "available") and tagged(n, job_id)
        ],
        "eips": ec2.describe_addresses(Filters=f)["Addresses"],
        "route_tables": ec2.describe_route_tables(Filters=f)["RouteTables"],
        "security_groups": ec2.describe_security_groups(Filters=f)["SecurityGroups"],
        "launch_templates": ec2.describe_launch_templates(Filters=f)["LaunchTemplates"],
        "igws": ec2.describe_internet_gateways(Filters=f)["InternetGateways"],
        "volumes": ec2.describe_volumes(Filters=f)["Volumes"],
    }
    roles = [r for r in iam.list_roles()["Roles"] if r["RoleName"].startswith("vmplane-")]
    out["roles"] = [r for r in roles if tagged({"Tags": iam.list_role_tags(RoleName=r["RoleName"])["Tags"]}, job_id)]
    return out


@pytest.mark.sandbox
def test_apply_then_destroy_fixed_pool(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-fixed")

    # A user's real AWS set-up must be neither read nor printed in sandbox mode (a broken profile
    # would fail the run if it were read; the secret must appear nowhere in the output).
    real = {
        "AWS_PROFILE": "no-such-profile",
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    }
    proc = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes", "--output", "json", extra_env=real)
    assert proc.returncode == 0, proc.stderr
    assert all(v not in proc.stdout + proc.stderr for v in real.values())
    job = json.loads(proc.stdout)
    job_id = job["id"]
    assert job["status"] == "succeeded", job["error"]
    assert [s["name"] for s in job["steps"]] == PROVISION
    assert all(s["status"] == "succeeded" for s in job["steps"])
    infra = job["config"]["infra"]
    assert infra["ExecMode"] == "SSM"
    assert infra["BootstrapNginxReady"] is True
    assert {v["Name"] for v in infra["VMs"]} == {"itest-fixed-web-0", "itest-fixed-web-1"}
    assert all(v["State"] == "ready" for v in infra["VMs"])
    assert infra["LoadBalancerID"] is None and infra["ScalingGroupID"] == {}

    ec2 = sandbox.client("ec2")
    found = job_resources(sandbox, job_id)
    private = set(infra["VMSubnetIDs"])
    public = set(infra["Cloud"]["PublicSubnetIDs"])
    assert len(private) == 2 and len(public) == 2

    # VMs: in private subnets, spread over both AZs, no public IP.
    instances = found["instances"]
    assert len(instances) == 2
    assert {i["SubnetId"] for i in instances} == private
    assert all("PublicIpAddress" not in i for i in instances)
    assert len({i["Placement"]["AvailabilityZone"] for i in instances}) == 2

    # The AWS CLI sees the same: private IPs only.
    if shutil.which("aws"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
        out = subprocess.run(
            [
                "aws",
                "ec2",
                "describe-instances",
                "--endpoint-url",
                sandbox.endpoint,
                "--output",
                "json",
                "--filters",
                f"Name=tag:zop:jobId,Values={job_id}",
                "Name=instance-state-name,Values=running",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        cli_instances = [i for r in json.loads(out.stdout)["Reservations"] for i in r["Instances"]]
        assert sorted(i["InstanceId"] for i in cli_instances) == sorted(i["InstanceId"] for i in instances)
        assert all(i.get("PublicIpAddress") is None and i["PrivateIpAddress"] for i in cli_instances)

    # Private subnets never map public IPs; their default route is the NAT, the public one's the IGW.
    for s in found["subnets"]:
        if s["SubnetId"] in private:
            assert s["MapPublicIpOnLaunch"] is False
    routes = {
        rt["RouteTableId"]: {r.get("DestinationCidrBlock"): r for r in rt["Routes"]} for rt in found["route_tables"]
    }
    assert (
        routes[infra["Cloud"]["PrivateRouteTableID"]]["0.0.0.0/0"]["NatGatewayId"] == infra["Cloud"]["NatGatewayIDs"][0]
    )
    assert routes[infra["Cloud"]["PublicRouteTableID"]]["0.0.0.0/0"]["GatewayId"] == infra["Cloud"]["InternetGatewayID"]
    assert len(found["nat"]) == 1 and found["nat"][0]["SubnetId"] in public

    # The VM security group: nothing on port 22, nothing from 0.0.0.0/0, only the VPC CIDR.
    sg = ec2.describe_security_groups(GroupIds=[infra["VMSecurityGroupID"]])["SecurityGroups"][0]
    for perm in sg["IpPermissions"]:
        assert not (perm.get("FromPort", 0) <= 22 <= perm.get("ToPort", 65535)) or perm["IpProtocol"] not in (
            "tcp",
            "-1",
        )
        assert perm["IpProtocol"] != "-1"
        assert all(r["CidrIp"] == infra["Cloud"]["VpcCidr"] for r in perm.get("IpRanges", []))
        assert not perm.get("Ipv6Ranges")
    assert {(p["FromPort"], p["ToPort"]) for p in sg["IpPermissions"]} == {(80, 80)}
    assert all({i["GroupId"] for i in inst["SecurityGroups"]} == {sg["GroupId"]} for inst in instances)

    # The launch template requires IMDSv2, uses the instance profile, encrypts the root volume.
    lt_id = infra["LaunchTemplateID"]["web"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=lt_id, Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["IamInstanceProfile"]["Arn"].endswith(f"instance-profile/{infra['Cloud']['InstanceProfileName']}")
    assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
    assert "KeyName" not in data  # no key pair, ever
    assert all("KeyName" not in i for i in instances)
    user_data = base64.b64decode(data["UserData"]).decode()
    assert user_data.startswith("#cloud-config")
    if shutil.which("cloud-init"):
        ud = tmp_path / "user-data.yaml"
        ud.write_text(user_data)
        check = subprocess.run(["cloud-init", "schema", "-c", str(ud)], capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr

    # IAM: exactly the exec-channel policy.
    iam = sandbox.client("iam")
    attached = iam.list_attached_role_policies(RoleName=infra["Cloud"]["RoleName"])["AttachedPolicies"]
    assert [p["PolicyName"] for p in attached] == ["AmazonSSMManagedInstanceCore"]
    assert iam.list_role_policies(RoleName=infra["Cloud"]["RoleName"])["PolicyNames"] == []

    # The four tags on every taggable resource, found through the VPC (not through the tag itself).
    vpc_filter = [{"Name": "vpc-id", "Values": [infra["NetworkID"]]}]
    in_vpc = [
        *ec2.describe_subnets(Filters=vpc_filter)["Subnets"],
        *ec2.describe_route_tables(Filters=vpc_filter)["RouteTables"],
        *ec2.describe_security_groups(Filters=vpc_filter)["SecurityGroups"],
        *ec2.describe_network_acls(Filters=vpc_filter)["NetworkAcls"],
        *ec2.describe_nat_gateways(Filter=vpc_filter)["NatGateways"],
        *[i for r in ec2.describe_instances(Filters=vpc_filter)["Reservations"] for i in r["Instances"]],
        *ec2.describe_vpcs(VpcIds=[infra["NetworkID"]])["Vpcs"],
        *ec2.describe_internet_gateways(InternetGatewayIds=[infra["Cloud"]["InternetGatewayID"]])["InternetGateways"],
        *ec2.describe_addresses(AllocationIds=infra["Cloud"]["ElasticIPAllocationIDs"])["Addresses"],
        *ec2.describe_launch_templates(LaunchTemplateIds=[lt_id])["LaunchTemplates"],
        *ec2.describe_volumes(
            Filters=[{"Name": "attachment.instance-id", "Values": [i["InstanceId"] for i in instances]}]
        )["Volumes"],
    ]
    untagged = [r for r in in_vpc if not tagged(r, job_id)]
    assert not untagged, untagged
    profile = iam.get_instance_profile(InstanceProfileName=infra["Cloud"]["InstanceProfileName"])["InstanceProfile"]
    assert tagged(profile, job_id)
    assert tagged({"Tags": iam.list_role_tags(RoleName=infra["Cloud"]["RoleName"])["Tags"]}, job_id)
    user_tags = {t["Key"]: t["Value"] for t in instances[0]["Tags"]}
    assert user_tags["team"] == "platform" and user_tags["Name"] in {"itest-fixed-web-0", "itest-fixed-web-1"}

    # The inventory shows it; a second apply of the same file changes nothing.
    envs = cli.json("envs")["environments"]
    assert [(e["org"], e["name"], e["job"]) for e in envs] == [("acme", "itest-fixed", job_id)]
    again = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert again.returncode == 0 and "No changes." in again.stdout + again.stderr
    assert len(job_resources(sandbox, job_id)["instances"]) == 2

    status = cli.json("status", "itest-fixed")
    assert status["id"] == job_id and status["status"] == "succeeded"

    # Destroy: the seed's order, ends deleted, and nothing tagged with the job id remains.
    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert [s["name"] for s in gone["teardownSteps"]] == TEARDOWN
    assert all(s["status"] == "succeeded" for s in gone["teardownSteps"])
    left = {k: v for k, v in job_resources(sandbox, job_id).items() if v}
    assert left == {}
    assert cli.json("envs")["environments"] == []
    # Destroying again is a no-op, not an error.
    assert cli.run("destroy", "-f", str(env_file), "--sandbox", "--yes").returncode == 0


@pytest.mark.sandbox
def test_azure_job_fails_with_clean_invalid(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    with deps_servers.serve("amd64") as upstream:
        env_file = write_env(tmp_path, "itest-azure", provider={"cloud": "azure", "region": "westeurope"}, exec={})
        # A real target: the shipped manifests' NGINX image is fetched first (here from the fake registry).
        mirrors = {"VMPLANE_DEPS_MIRRORS": upstream.mirrors()}
        proc = cli.run("apply", "-f", str(env_file), "--yes", "--output", "json", extra_env=mirrors)
        assert proc.returncode == 1, proc.stderr
        job = json.loads(proc.stdout)
        assert job["status"] == "failed"
        validate = job["steps"][0]
        assert validate["name"] == "stepValidate" and validate["status"] == "failed"
        assert validate["error"].startswith("Invalid: Azure")
        assert all(s["status"] == "pending" for s in job["steps"][1:])
        # The stub reads nothing back: drift says so (a usage error), it never claims "no drift".
        drift = cli.run("drift", "itest-azure")
        assert drift.returncode == 2 and "drift detection: not supported by the azure driver" in drift.stderr

        # Nothing was created, so destroy forgets the record with no teardown and no cloud call (a teardown
        # once ended delete_failed with an AttributeError, after which a new apply was refused for good).
        gone = cli.json("destroy", "-f", str(env_file), "--yes")
        assert gone["status"] == "deleted", gone["error"]
        assert gone["teardownSteps"] == [] and gone["config"]["forgottenAt"]
        again = cli.run("apply", "-f", str(env_file), "--yes", "--output", "json", extra_env=mirrors)
        assert again.returncode == 1 and json.loads(again.stdout)["id"] != job["id"]  # a new job, not a refusal


@pytest.mark.sandbox
def test_asg_pool_in_private_subnets_then_scaled_to_zero_and_deleted(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-asg", pools={"web": {"mode": "asg", "min": 1, "max": 3, "desired": 2}})
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    infra = job["config"]["infra"]
    name = infra["ScalingGroupID"]["web"]
    asg = sandbox.client("autoscaling")
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (1, 3, 2)
    assert set(group["VPCZoneIdentifier"].split(",")) == set(infra["VMSubnetIDs"])
    assert group["LaunchTemplate"]["LaunchTemplateId"] == infra["LaunchTemplateID"]["web"]
    tags = {t["Key"]: (t["Value"], t["PropagateAtLaunch"]) for t in group["Tags"]}
    assert tags["zop:jobId"] == (job["id"], True)
    assert len(infra["VMs"]) == 2 and all(v["State"] == "ready" for v in infra["VMs"])

    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"] == []
    assert not any(job_resources(sandbox, job["id"]).values())
