"""clouds/aws/preflight.py: image references, and the account/zone/image/arch checks against moto."""

from __future__ import annotations

import pytest

from vmplane.clouds.aws import preflight
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.errors import InvalidRequestError
from vmplane.envspec.models import Arch

from .support import ZONES, make_ctx, variant

AL2023_X86 = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"


@pytest.mark.parametrize(
    ("image", "arch", "expected"),
    [
        ("al2023", Arch.amd64, AL2023_X86),
        ("al2023", Arch.arm64, "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"),
        (
            "ubuntu-24.04",
            Arch.arm64,
            "/aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id",
        ),
        ("debian-12", Arch.amd64, "/aws/service/debian/release/12/latest/amd64"),
        ("ssm:/my/golden/image", Arch.amd64, "/my/golden/image"),
        ("ami-0123456789abcdef0", Arch.arm64, None),
    ],
)
def test_image_parameter(image, arch, expected):
    assert preflight.image_parameter(image, arch) == expected


@pytest.mark.parametrize("image", ["centos-7", "AL2023", "", "amazon-linux"])
def test_unknown_image_is_refused_with_the_choices(image):
    with pytest.raises(InvalidRequestError, match=r"unknown image .*al2023, debian-12, ubuntu-24\.04"):
        preflight.image_parameter(image, Arch.amd64)


def test_preflight_resolves_the_account_zones_and_image(aws, spec):
    ctx = make_ctx(spec)
    preflight.preflight(aws, ctx)
    infra = ctx.infra
    assert aws_ids(infra).AccountID == aws.sts.get_caller_identity()["Account"]
    assert infra.Region == "us-east-1"
    assert infra.ExecMode == "SSM"
    assert infra.Zones == ZONES  # the first `network.zones` available zones, sorted
    ami = aws.ssm.get_parameter(Name=AL2023_X86)["Parameter"]["Value"]
    assert ami.startswith("ami-")
    assert aws_ids(infra).Images["web"].ImageID == ami
    image = aws.ec2.describe_images(ImageIds=[ami])["Images"][0]
    assert aws_ids(infra).Images["web"].RootDeviceName == image["RootDeviceName"]
    assert ctx.save.calls == 1 and ctx.save.last == infra.model_dump(mode="json")


def test_preflight_picks_as_many_zones_as_asked(aws, spec):
    ctx = make_ctx(variant(spec, network={"zones": 3}))
    preflight.preflight(aws, ctx)
    assert ctx.infra.Zones == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_preflight_refuses_more_zones_than_the_region_has(aws, spec):
    west = AwsClients(AwsTarget(region="us-west-1"))  # two zones in the emulator
    assert len(west.ec2.describe_availability_zones()["AvailabilityZones"]) == 2
    ctx = make_ctx(variant(spec, provider={"region": "us-west-1"}, network={"zones": 3}))
    with pytest.raises(InvalidRequestError, match=r"us-west-1 has 2 available zones, network\.zones asks for 3"):
        preflight.preflight(west, ctx)


def test_preflight_rejects_an_arm64_pool_on_an_x86_only_type(aws, spec):
    arm = variant(spec, pools={"web": {"arch": "arm64"}})
    ctx = make_ctx(arm)
    with pytest.raises(InvalidRequestError, match=r"pools\.web\.instanceType: t3\.small does not run arm64") as caught:
        preflight.preflight(aws, ctx)
    assert "x86_64" in str(caught.value)
    assert ctx.save.calls == 0  # nothing half-resolved was checkpointed


def test_preflight_accepts_an_arm64_pool_on_graviton(aws, spec):
    ctx = make_ctx(variant(spec, pools={"web": {"arch": "arm64", "instanceType": "t4g.small"}}))
    preflight.preflight(aws, ctx)
    image = aws.ec2.describe_images(ImageIds=[aws_ids(ctx.infra).Images["web"].ImageID])["Images"][0]
    assert image["Architecture"] == "arm64"


def test_preflight_rejects_an_image_of_the_wrong_arch(aws, spec):
    x86 = aws.ssm.get_parameter(Name=AL2023_X86)["Parameter"]["Value"]
    ctx = make_ctx(variant(spec, pools={"web": {"arch": "arm64", "instanceType": "t4g.small", "image": x86}}))
    with pytest.raises(InvalidRequestError, match=rf"pools\.web\.image: {x86} is x86_64, pool arch is arm64"):
        preflight.preflight(aws, ctx)


def test_preflight_rejects_a_missing_ssm_parameter(aws, spec):
    ctx = make_ctx(variant(spec, pools={"web": {"image": "ssm:/no/such/parameter"}}))
    with pytest.raises(InvalidRequestError, match=r"pools\.web\.image: parameter /no/such/parameter not found"):
        preflight.preflight(aws, ctx)


def test_preflight_rejects_an_unknown_instance_type(aws, spec):
    ctx = make_ctx(variant(spec, pools={"web": {"instanceType": "t9.gigantic"}}))
    with pytest.raises(InvalidRequestError, match=r"t9\.gigantic"):
        preflight.preflight(aws, ctx)


def test_preflight_skips_zones_for_an_existing_vpc(aws, spec):
    ctx = make_ctx(variant(spec, network={"existingVpcId": "vpc-0abc", "existingPrivateSubnetIds": ["subnet-1"]}))
    preflight.preflight(aws, ctx)
    assert ctx.infra.Zones == []  # taken from the subnets by stepCreateNetwork instead
    assert "web" in aws_ids(ctx.infra).Images


def test_an_instance_type_of_another_cloud_names_its_pool_and_the_region(aws, spec):
    # A Google Cloud machine type: the offerings list has no entry, so the pool's field is named (not
    # describe_instance_types' batch refusal "[e2-small] do not exist", which named no field).
    ctx = make_ctx(variant(spec, pools={"web": {"instanceType": "e2-small"}}))
    with pytest.raises(InvalidRequestError) as caught:
        preflight.preflight(aws, ctx)
    assert str(caught.value).startswith("pools.web.instanceType: e2-small is not offered in us-east-1's zones")
    assert ctx.save.calls == 0


def test_a_type_missing_from_a_zone_the_network_uses_is_refused(aws, spec):
    # moto's us-east-1e offers no t3 types (as AWS's oldest zone there): five zones take it in.
    offered = aws.ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["t3.small"]}]
    )["InstanceTypeOfferings"]
    assert "us-east-1e" not in {o["Location"] for o in offered}
    ctx = make_ctx(variant(spec, network={"zones": 5}))
    with pytest.raises(InvalidRequestError, match=r"^pools\.web\.instanceType: t3\.small is not offered in us-east-1e"):
        preflight.preflight(aws, ctx)
    preflight.preflight(aws, make_ctx(variant(spec, network={"zones": 4})))  # a-d all offer it
