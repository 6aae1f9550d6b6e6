"""stepValidate's cloud half: who we are, which zones, which images, do the types fit the arch, and can
every referenced secret be read (metadata only: its value is the VM's to read)."""

from __future__ import annotations

from functools import partial

from vmplane.clouds.aws import conflicts
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import PoolImage, aws_ids
from vmplane.clouds.aws.secret_policy import ANY_ACCOUNT, aws_refs, size_problem
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.secret_access import SecretProblemsError
from vmplane.envspec.models import Arch, EnvSpec
from vmplane.envspec.secrets import secret_refs

AWS_ARCH = {Arch.amd64: "x86_64", Arch.arm64: "arm64"}

# Public SSM parameters that always point at the current image of each distribution.
IMAGE_ALIASES: dict[str, dict[Arch, str]] = {
    "al2023": {
        Arch.amd64: "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
        Arch.arm64: "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64",
    },
    "ubuntu-24.04": {
        Arch.amd64: "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
        Arch.arm64: "/aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id",
    },
    "debian-12": {
        Arch.amd64: "/aws/service/debian/release/12/latest/amd64",
        Arch.arm64: "/aws/service/debian/release/12/latest/arm64",
    },
}


def image_parameter(image: str, arch: Arch) -> str | None:
    """The SSM parameter an image reference resolves through, or None for a literal AMI id."""
    if image.startswith("ami-"):
        return None
    if image.startswith("ssm:"):
        return image.removeprefix("ssm:")
    if image in IMAGE_ALIASES:
        return IMAGE_ALIASES[image][arch]
    known = ", ".join(sorted(IMAGE_ALIASES))
    raise InvalidRequestError(f"unknown image {image!r}: use an ami-... id, ssm:/parameter, or one of {known}")


def preflight(aws: AwsClients, ctx: Context) -> None:
    """Resolve what the steps need (account, zones, images) and refuse what would fail later (an image of
    another architecture, a type not offered here, a name someone else owns). The lookups are
    independent, so they run side by side; a failure is the first in this order."""
    infra, spec = ctx.infra, ctx.spec
    infra.Region = spec.provider.region
    infra.ExecMode = spec.exec_mode.value
    account, zones, images, offered, _, _ = side_by_side(
        lambda: aws_call(aws.sts.get_caller_identity)["Account"],
        lambda: _zones(aws, ctx) if not spec.network.existing_vpc_id else infra.Zones,
        lambda: dict(zip(spec.pools, side_by_side(*(partial(_image, aws, ctx, n) for n in spec.pools)), strict=True)),
        lambda: _check_instance_types(aws, ctx),
        lambda: conflicts.check_names(aws, ctx),  # before any step creates something under these names
        lambda: check_secrets(aws, spec),
    )
    _check_offered_in_zones(ctx, offered, zones)
    aws_ids(infra).AccountID, infra.Zones, aws_ids(infra).Images = account, zones, images
    ctx.save()
    ctx.log(f"account {aws_ids(infra).AccountID}, zones {', '.join(infra.Zones)}, images resolved")


def _zones(aws: AwsClients, ctx: Context) -> list[str]:
    spec = ctx.spec
    zones = aws_call(
        aws.ec2.describe_availability_zones,
        Filters=[
            {"Name": "state", "Values": ["available"]},
            {"Name": "zone-type", "Values": ["availability-zone"]},
        ],
    )["AvailabilityZones"]
    names = sorted(z["ZoneName"] for z in zones)
    if len(names) < spec.network.zones:
        raise InvalidRequestError(
            f"{spec.provider.region} has {len(names)} available zones, network.zones asks for {spec.network.zones}"
        )
    return names[: spec.network.zones]


def _image(aws: AwsClients, ctx: Context, pool_name: str) -> PoolImage:
    spec = ctx.spec
    pool = spec.pools[pool_name]
    param = image_parameter(pool.image, pool.arch)
    if param:
        try:
            ami = aws_call(aws.ssm.get_parameter, Name=param)["Parameter"]["Value"]
        except NotFoundError as err:
            raise InvalidRequestError(f"pools.{pool_name}.image: parameter {param} not found in region") from err
    else:
        ami = pool.image
    found = aws_call(aws.ec2.describe_images, ImageIds=[ami])["Images"]
    if not found:
        raise InvalidRequestError(f"pools.{pool_name}.image: {ami} not found in {spec.provider.region}")
    if found[0].get("Architecture") != AWS_ARCH[pool.arch]:
        raise InvalidRequestError(
            f"pools.{pool_name}.image: {ami} is {found[0].get('Architecture')}, pool arch is {pool.arch.value}"
        )
    return PoolImage(ImageID=ami, RootDeviceName=found[0].get("RootDeviceName", "/dev/xvda"))


def _check_instance_types(aws: AwsClients, ctx: Context) -> dict[str, set[str]]:
    """Each pool's type is offered in the region and runs the pool's arch; returns type -> the zones
    offering it. The offerings list is asked first: it names an unknown type (`e2-small`) by its pool,
    where describe_instance_types would refuse the whole batch with no field."""
    spec = ctx.spec
    types = sorted({p.instance_type for p in spec.pools.values()})
    offered: dict[str, set[str]] = {t: set() for t in types}
    with aws_errors():
        pages = aws.ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": types}]
        )
        for page in pages:
            for o in page["InstanceTypeOfferings"]:
                offered.setdefault(o["InstanceType"], set()).add(o["Location"])
    region = spec.provider.region
    for pool_name, pool in spec.pools.items():
        if not offered.get(pool.instance_type):
            raise InvalidRequestError(
                f"pools.{pool_name}.instanceType: {pool.instance_type} is not offered in {region}'s zones "
                "(an EC2 instance type such as t3.small; `aws ec2 describe-instance-type-offerings` lists them)"
            )
    described = aws_call(aws.ec2.describe_instance_types, InstanceTypes=types)["InstanceTypes"]
    archs = {d["InstanceType"]: d["ProcessorInfo"]["SupportedArchitectures"] for d in described}
    for pool_name, pool in spec.pools.items():
        if pool.instance_type not in archs:
            raise InvalidRequestError(f"pools.{pool_name}.instanceType: {pool.instance_type} is not offered here")
        if AWS_ARCH[pool.arch] not in archs[pool.instance_type]:
            raise InvalidRequestError(
                f"pools.{pool_name}.instanceType: {pool.instance_type} does not run {pool.arch.value} "
                f"(supports {', '.join(archs[pool.instance_type])})"
            )
    return offered


def _check_offered_in_zones(ctx: Context, offered: dict[str, set[str]], zones: list[str]) -> None:
    """A pool spreads over every zone the network uses: its type must be offered in each of them."""
    for pool_name, pool in ctx.spec.pools.items():
        missing = [z for z in zones if z not in offered.get(pool.instance_type, set())]
        if missing:
            raise InvalidRequestError(
                f"pools.{pool_name}.instanceType: {pool.instance_type} is not offered in {', '.join(missing)}, "
                f"a zone the network uses (offered in {', '.join(sorted(offered[pool.instance_type]))})"
            )


def check_secrets(aws: AwsClients, spec: EnvSpec) -> None:
    """Each secret exists and can be read, and the role's policy for them fits IAM's size limit (its
    ARNs as DescribeSecret answers them; any 12-digit account makes a parameter's ARN as long)."""
    refs = aws_refs(secret_refs(spec))
    if not refs:
        return
    access = AwsSecretAccess(aws, memo=True)  # the grants below reuse the problems' lookups
    access.refuse_unreadable(refs)
    if too_big := size_problem(access.grants(refs, ANY_ACCOUNT), spec.provider.region):
        raise SecretProblemsError([too_big])
