"""The AWS driver end to end on moto: every provision step, VMs, then the seed's teardown order to zero."""

from __future__ import annotations

from functools import partial

from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.base import Leftover
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.state import VMState

from .support import JOB_ID, REGION, make_ctx, tags_of


def _live_instances(aws):
    f = [
        {"Name": "tag:zop:jobId", "Values": [JOB_ID]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ]
    return [i for r in aws.ec2.describe_instances(Filters=f)["Reservations"] for i in r["Instances"]]


def test_provision_then_teardown_leaves_nothing(aws_iam, spec):
    driver = AwsDriver(AwsTarget(region=REGION))
    aws = driver.aws
    ctx = make_ctx(spec)
    for step in (
        driver.preflight,
        driver.network.ensure,
        partial(create_identity, driver),
        driver.pools.ensure_templates,
        driver.pools.ensure_vms,
    ):
        step(ctx)
    infra = ctx.infra

    # Two VMs with stable names, one per private subnet/zone, ready, from launch template v1.
    assert [v.Name for v in infra.VMs] == ["demo-fixed-web-0", "demo-fixed-web-1"]
    assert all(v.State is VMState.ready for v in infra.VMs)
    assert [v.SubnetID for v in infra.VMs] == infra.VMSubnetIDs
    assert [v.AZ for v in infra.VMs] == infra.Zones
    assert all(v.LaunchTemplateVersion == 1 for v in infra.VMs)
    live = {i["InstanceId"]: i for i in _live_instances(aws)}
    assert set(live) == {v.ID for v in infra.VMs}
    for vm in infra.VMs:
        inst = live[vm.ID]
        assert "PublicIpAddress" not in inst or not inst["PublicIpAddress"]
        assert inst["PrivateIpAddress"] == vm.PrivateIP
        # Launched from our template (moto does not echo the template's instance profile on the instance).
        assert tags_of(inst)["aws:ec2launchtemplate:id"] == infra.LaunchTemplateID["web"]
        assert tags_of(inst)["aws:ec2launchtemplate:version"] == "1"
        assert inst["ImageId"] == aws_ids(infra).Images["web"].ImageID
        assert [g["GroupId"] for g in inst["SecurityGroups"]] == [infra.VMSecurityGroupID]
        assert tags_of(inst)["Name"] == vm.Name and tags_of(inst)["zop:role"] == "vm"
    assert ctx.save.last == infra.model_dump(mode="json")

    # Running the step again (e.g. a resumed workflow) launches nothing new, even without the record.
    driver.pools.ensure_vms(ctx)
    lost = make_ctx(spec, infra.model_copy(update={"VMs": []}))
    driver.pools.ensure_vms(lost)
    assert {i["InstanceId"] for i in _live_instances(aws)} == set(live)
    assert {v.ID for v in lost.infra.VMs} == set(live)

    assert {lo.kind for lo in driver.inventory.leftovers(ctx)} >= {"instance", "vpc", "nat-gateway", "iam-role"}

    for step in (
        driver.pools.delete_vms,
        driver.pools.delete_templates,
        driver.network.delete_firewall,
        partial(delete_identity, driver),
        driver.network.delete,
    ):
        step(ctx)
    assert driver.inventory.leftovers(ctx) == []
    assert infra.VMs == [] and infra.NetworkID is None and aws_ids(infra).RoleName is None

    # Teardown is idempotent: a second pass over an empty account is a no-op.
    for step in (
        driver.pools.delete_vms,
        driver.network.delete_firewall,
        partial(delete_identity, driver),
        driver.network.delete,
    ):
        step(make_ctx(spec))
    assert driver.inventory.leftovers(make_ctx(spec)) == []


def test_leftovers_sees_only_this_job(aws, spec):
    driver = AwsDriver(AwsTarget(region=REGION))
    aws = driver.aws
    mine = aws.ec2.create_vpc(
        CidrBlock="10.1.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "zop:jobId", "Value": JOB_ID}]}],
    )["Vpc"]["VpcId"]
    aws.ec2.create_vpc(
        CidrBlock="10.2.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "zop:jobId", "Value": "job-other-2"}]}],
    )
    assert Leftover("vpc", mine) in driver.inventory.leftovers(make_ctx(spec))
    assert [lo for lo in driver.inventory.leftovers(make_ctx(spec)) if lo.kind == "vpc"] == [Leftover("vpc", mine)]
