"""clouds/aws/security_groups.py and templates.py against moto: the VM security group and the launch templates."""

from __future__ import annotations

import base64

import pytest

from vmplane.clouds.aws import network, preflight, security_groups, templates
from vmplane.clouds.aws.ids import AwsInfra, aws_ids
from vmplane.state import InfraConfig, VMRecord

from .support import JOB_ID, make_ctx, tags_of, variant

PROFILE_ARN = "arn:aws:iam::123456789012:instance-profile/vmplane-acme-demo-fixed-vm"
LT_NAME = "vmplane-acme-demo-fixed-web"


def ready_ctx(aws, spec, infra=None):
    """A context as stepCreateLaunchTemplate sees it: preflight and network done, identity recorded.

    The instance profile ARN is recorded by hand (stepCreateIAM is covered in test_aws_iam.py) so these
    tests need not load IAM's managed policies."""
    ctx = make_ctx(spec, infra)
    preflight.preflight(aws, ctx)
    network.ensure_network(aws, ctx)
    aws_ids(ctx.infra).InstanceProfileArn = PROFILE_ARN
    return ctx


def _group(aws, gid):
    return aws.ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]


def _rules(group):
    """Every ingress rule as (protocol, from, to, source)."""
    out = set()
    for perm in group["IpPermissions"]:
        key = (perm["IpProtocol"], perm.get("FromPort"), perm.get("ToPort"))
        out |= {(*key, r["CidrIp"]) for r in perm.get("IpRanges", [])}
        out |= {(*key, r["CidrIpv6"]) for r in perm.get("Ipv6Ranges", [])}
        out |= {(*key, g["GroupId"]) for g in perm.get("UserIdGroupPairs", [])}
    return out


def _job_groups(aws):
    f = [{"Name": "tag:zop:jobId", "Values": [JOB_ID]}, {"Name": "tag:zop:role", "Values": ["vm-sg"]}]
    return aws.ec2.describe_security_groups(Filters=f)["SecurityGroups"]


# ---- security group -------------------------------------------------------------------------------


@pytest.fixture
def web(aws, spec):
    return ready_ctx(aws, variant(spec, network={"ingressPorts": [8080, 80, 443]}))


def test_security_group_opens_only_the_spec_ports_from_the_vpc(aws, web):
    gid = security_groups.ensure_security_group(aws, web)
    group = _group(aws, gid)
    assert group["VpcId"] == web.infra.NetworkID
    assert web.infra.VMSecurityGroupID == gid
    assert _rules(group) == {("tcp", p, p, "10.40.0.0/16") for p in (80, 443, 8080)}
    assert not any(r[1] is not None and r[1] <= 22 <= r[2] for r in _rules(group))
    assert not any(r[3] in ("0.0.0.0/0", "::/0") for r in _rules(group))
    tags = tags_of(group)
    assert tags["zop:jobId"] == JOB_ID and tags["zop:role"] == "vm-sg"
    assert web.save.last == web.infra.model_dump(mode="json")


def test_security_group_is_found_by_tag_not_duplicated(aws, spec, web):
    gid = security_groups.ensure_security_group(aws, web)
    assert security_groups.ensure_security_group(aws, web) == gid
    lost = make_ctx(
        web.spec, InfraConfig(NetworkID=web.infra.NetworkID, Cloud=AwsInfra(VpcCidr=aws_ids(web.infra).VpcCidr))
    )
    assert security_groups.ensure_security_group(aws, lost) == gid
    assert [g["GroupId"] for g in _job_groups(aws)] == [gid]
    assert len(_rules(_group(aws, gid))) == 3


def test_stale_rules_added_by_hand_are_revoked(aws, web):
    gid = security_groups.ensure_security_group(aws, web)
    aws.ec2.authorize_security_group_ingress(
        GroupId=gid,
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
            {"IpProtocol": "tcp", "FromPort": 9000, "ToPort": 9000, "IpRanges": [{"CidrIp": "10.40.0.0/16"}]},
            {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "IpRanges": [{"CidrIp": "203.0.113.0/24"}]},
        ],
    )
    assert len(_rules(_group(aws, gid))) == 6
    security_groups.ensure_security_group(aws, web)
    assert _rules(_group(aws, gid)) == {("tcp", p, p, "10.40.0.0/16") for p in (80, 443, 8080)}


def test_changed_ports_are_reconciled_in_place(aws, web):
    gid = security_groups.ensure_security_group(aws, web)
    narrowed = make_ctx(variant(web.spec, network={"ingressPorts": [443, 9443]}), web.infra)
    assert security_groups.ensure_security_group(aws, narrowed) == gid
    assert _rules(_group(aws, gid)) == {("tcp", 443, 443, "10.40.0.0/16"), ("tcp", 9443, 9443, "10.40.0.0/16")}


def test_a_hand_added_all_traffic_rule_is_revoked(aws, web):
    gid = security_groups.ensure_security_group(aws, web)
    aws.ec2.authorize_security_group_ingress(
        GroupId=gid, IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    )
    security_groups.ensure_security_group(aws, web)
    assert _rules(_group(aws, gid)) == {("tcp", p, p, "10.40.0.0/16") for p in (80, 443, 8080)}


# ---- launch templates -----------------------------------------------------------------------------


@pytest.fixture
def ctx(aws, spec):
    return ready_ctx(aws, spec)


def _check_template_data(data, ctx):
    assert data["ImageId"] == aws_ids(ctx.infra).Images["web"].ImageID
    assert data["InstanceType"] == "t3.small"
    assert data["MetadataOptions"]["HttpTokens"] == "required"  # IMDSv2 only
    assert data["IamInstanceProfile"] == {"Arn": PROFILE_ARN}
    assert data["SecurityGroupIds"] == [ctx.infra.VMSecurityGroupID]
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == aws_ids(ctx.infra).Images["web"].RootDeviceName
    assert root["Ebs"]["VolumeType"] == "gp3"
    assert root["Ebs"]["Encrypted"] is True
    assert root["Ebs"]["VolumeSize"] == ctx.spec.pools["web"].disk_gb
    user_data = base64.b64decode(data["UserData"]).decode()
    assert user_data.startswith("#cloud-config")
    assert "NetworkInterfaces" not in data  # never a public IP


def test_launch_template_data(aws, ctx):
    security_groups.ensure_security_group(aws, ctx)
    data = templates.launch_template_data(ctx, "web")
    _check_template_data(data, ctx)
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 20
    tagged = {s["ResourceType"]: tags_of(s) for s in data["TagSpecifications"]}
    assert set(tagged) == {"instance", "volume", "network-interface"}
    assert all(t["zop:jobId"] == JOB_ID for t in tagged.values())


def test_launch_template_data_follows_disk_size(spec):
    big = make_ctx(variant(spec, pools={"web": {"diskGb": 64}}))
    aws_ids(big.infra).Images = {"web": {"ImageID": "ami-12c6146b", "RootDeviceName": "/dev/sda1"}}
    aws_ids(big.infra).InstanceProfileArn, big.infra.VMSecurityGroupID = PROFILE_ARN, "sg-1"
    root = templates.launch_template_data(big, "web")["BlockDeviceMappings"][0]
    assert root == {
        "DeviceName": "/dev/sda1",
        "Ebs": {"VolumeSize": 64, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
    }


def _templates(aws):
    f = [{"Name": "tag:zop:jobId", "Values": [JOB_ID]}]
    return aws.ec2.describe_launch_templates(Filters=f)["LaunchTemplates"]


def _latest(aws, lt_id):
    return aws.ec2.describe_launch_template_versions(LaunchTemplateId=lt_id, Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]


def test_ensure_launch_templates_creates_one_template_as_specified(aws, ctx):
    templates.ensure_launch_templates(aws, ctx)
    (lt,) = _templates(aws)
    assert lt["LaunchTemplateName"] == LT_NAME
    assert ctx.infra.LaunchTemplateID == {"web": lt["LaunchTemplateId"]}
    assert ctx.infra.LaunchTemplateVersion == {"web": 1}
    assert ctx.infra.VMSecurityGroupID  # the security group came first
    latest = _latest(aws, lt["LaunchTemplateId"])
    assert latest["VersionNumber"] == 1
    _check_template_data(latest["LaunchTemplateData"], ctx)
    assert ctx.save.last == ctx.infra.model_dump(mode="json")


def test_ensure_launch_templates_twice_keeps_one_template_and_one_version(aws, spec, ctx):
    templates.ensure_launch_templates(aws, ctx)
    templates.ensure_launch_templates(aws, ctx)
    lost = make_ctx(spec, ctx.infra.model_copy(update={"LaunchTemplateID": {}, "LaunchTemplateVersion": {}}))
    templates.ensure_launch_templates(aws, lost)
    (lt,) = _templates(aws)
    assert lt["LatestVersionNumber"] == 1
    assert lost.infra.LaunchTemplateID == ctx.infra.LaunchTemplateID
    assert lost.infra.LaunchTemplateVersion == {"web": 1}


def _another_amd64_ami(aws, current):
    filters = [{"Name": "architecture", "Values": ["x86_64"]}, {"Name": "name", "Values": ["ubuntu/images/*"]}]
    images = aws.ec2.describe_images(Owners=["amazon"], Filters=filters)["Images"]
    return next(i for i in images if i["ImageId"] != current)


def test_a_new_image_is_a_new_version_of_the_same_template(aws, spec, ctx):
    templates.ensure_launch_templates(aws, ctx)
    lt_id = ctx.infra.LaunchTemplateID["web"]
    other = _another_amd64_ami(aws, aws_ids(ctx.infra).Images["web"].ImageID)

    moved = make_ctx(variant(spec, pools={"web": {"image": other["ImageId"]}}), ctx.infra)
    preflight.preflight(aws, moved)  # resolves the new image into aws_ids(infra).Images
    templates.ensure_launch_templates(aws, moved)

    assert moved.infra.LaunchTemplateID == {"web": lt_id}
    assert moved.infra.LaunchTemplateVersion == {"web": 2}
    (lt,) = _templates(aws)
    assert lt["LaunchTemplateId"] == lt_id and lt["LatestVersionNumber"] == 2
    latest = _latest(aws, lt_id)
    assert latest["VersionNumber"] == 2
    assert latest["LaunchTemplateData"]["ImageId"] == other["ImageId"]
    assert latest["LaunchTemplateData"]["BlockDeviceMappings"][0]["DeviceName"] == other["RootDeviceName"]
    # Unchanged again: no version 3.
    templates.ensure_launch_templates(aws, moved)
    assert _templates(aws)[0]["LatestVersionNumber"] == 2


def test_new_tags_are_a_new_version_and_leave_no_vm_outdated(aws, spec, ctx):
    templates.ensure_launch_templates(aws, ctx)
    lt_id = ctx.infra.LaunchTemplateID["web"]
    ctx.infra.VMs = [VMRecord(Name="demo-fixed-web-0", Pool="web", Index=0, ID="i-0", LaunchTemplateVersion=1)]
    retagged = make_ctx(variant(spec, tags={"team": "payments"}), ctx.infra)
    templates.ensure_launch_templates(aws, retagged)
    # VMs launched later (an ASG scaling out, a replacement) get the new tags from the template...
    latest = _latest(aws, lt_id)
    assert latest["VersionNumber"] == 2
    tags = {
        s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]}
        for s in latest["LaunchTemplateData"]["TagSpecifications"]
    }
    assert tags["instance"]["team"] == "payments" and tags["volume"]["team"] == "payments"
    # ...and the running VM is not outdated: its tags are updated in place, nothing needs replacing.
    assert retagged.infra.LaunchTemplateVersion == {"web": 2}
    assert [v.LaunchTemplateVersion for v in retagged.infra.VMs] == [2]
    assert retagged.infra.outdated_vms() == []
    # Unchanged again: no version 3; a real change after it still makes the VM outdated.
    templates.ensure_launch_templates(aws, retagged)
    assert _templates(aws)[0]["LatestVersionNumber"] == 2
    bigger = make_ctx(variant(spec, tags={"team": "payments"}, pools={"web": {"diskGb": 40}}), retagged.infra)
    templates.ensure_launch_templates(aws, bigger)
    assert [v.Name for v in bigger.infra.outdated_vms()] == ["demo-fixed-web-0"]


def test_a_crash_after_the_tag_version_still_leaves_no_vm_outdated(aws, spec, ctx):
    templates.ensure_launch_templates(aws, ctx)
    lt_id = ctx.infra.LaunchTemplateID["web"]
    retagged = make_ctx(variant(spec, tags={"team": "payments"}), ctx.infra)
    data = templates.launch_template_data(retagged, "web")
    aws.ec2.create_launch_template_version(LaunchTemplateId=lt_id, LaunchTemplateData=data)  # then the crash
    ctx.infra.VMs = [VMRecord(Name="demo-fixed-web-0", Pool="web", Index=0, ID="i-0", LaunchTemplateVersion=1)]
    templates.ensure_launch_templates(aws, make_ctx(retagged.spec, ctx.infra))
    assert ctx.infra.LaunchTemplateVersion == {"web": 2} and ctx.infra.outdated_vms() == []
    assert _templates(aws)[0]["LatestVersionNumber"] == 2


def test_a_new_disk_size_is_a_new_version(aws, spec, ctx):
    templates.ensure_launch_templates(aws, ctx)
    bigger = make_ctx(variant(spec, pools={"web": {"diskGb": 40}}), ctx.infra)
    templates.ensure_launch_templates(aws, bigger)
    latest = _latest(aws, ctx.infra.LaunchTemplateID["web"])
    assert latest["LaunchTemplateData"]["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 40


def test_delete_launch_templates_and_security_group(aws, ctx):
    templates.ensure_launch_templates(aws, ctx)
    gid = ctx.infra.VMSecurityGroupID
    templates.delete_launch_templates(aws, ctx)
    security_groups.delete_security_group(aws, ctx)
    assert _templates(aws) == []
    assert _job_groups(aws) == []
    assert gid not in {g["GroupId"] for g in aws.ec2.describe_security_groups()["SecurityGroups"]}
    # The VPC's own default group (tagged with the job as a vpc-default) is left for the VPC deletion.
    default = aws.ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [ctx.infra.NetworkID]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"]
    assert len(default) == 1
    assert ctx.infra.LaunchTemplateID == {} and ctx.infra.VMSecurityGroupID is None
