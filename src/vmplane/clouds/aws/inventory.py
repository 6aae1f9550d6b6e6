"""Everything still tagged with a job id: what `destroy` must leave none of."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from vmplane.clouds.aws import iam, lb, schedules
from vmplane.clouds.aws.asg import job_scaling_groups
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import job_filters, matches_tag_filters, owned_by
from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.parallel import side_by_side

Found = tuple[str, str, list[dict[str, str]]]

# (kind, describe method, result key, id key, extra filters that exclude already-gone resources)
_EC2_KINDS: list[tuple[str, str, str, str, list[dict[str, object]]]] = [
    (
        "instance",
        "describe_instances",
        "Reservations",
        "InstanceId",
        [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}],
    ),
    ("vpc", "describe_vpcs", "Vpcs", "VpcId", []),
    ("subnet", "describe_subnets", "Subnets", "SubnetId", []),
    ("internet-gateway", "describe_internet_gateways", "InternetGateways", "InternetGatewayId", []),
    (
        "nat-gateway",
        "describe_nat_gateways",
        "NatGateways",
        "NatGatewayId",
        [{"Name": "state", "Values": ["pending", "available", "deleting"]}],
    ),
    ("elastic-ip", "describe_addresses", "Addresses", "AllocationId", []),
    ("route-table", "describe_route_tables", "RouteTables", "RouteTableId", []),
    ("security-group", "describe_security_groups", "SecurityGroups", "GroupId", []),
    ("launch-template", "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId", []),
    ("volume", "describe_volumes", "Volumes", "VolumeId", []),
    ("network-interface", "describe_network_interfaces", "NetworkInterfaces", "NetworkInterfaceId", []),
]


def job_ec2_resources(aws: AwsClients, ctx: Context) -> list[tuple[str, str, list[dict[str, str]]]]:
    """Every EC2 resource tagged with the job: (kind, id, tags). One describe per kind, side by side."""
    base = job_filters(ctx.tagger)

    def kind_of(kind: str, method: str, key: str, id_key: str, extra: list[dict[str, object]]) -> list[Found]:
        items = aws_call(getattr(aws.ec2, method), Filters=[*base, *extra])[key]
        if key == "Reservations":
            items = [i for r in items for i in r["Instances"]]
        return [(kind, str(i[id_key]), i.get("Tags", [])) for i in items if matches_tag_filters(i, base)]

    return [found for per_kind in side_by_side(*(partial(kind_of, *k) for k in _EC2_KINDS)) for found in per_kind]


def leftovers(aws: AwsClients, ctx: Context) -> list[Leftover]:
    """What `destroy` must leave none of; the lookups are independent, so they run side by side."""
    name = aws_ids(ctx.infra).RoleName or iam.role_name(ctx)

    def iam_entity(kind: str, fetch: Callable[[], list[dict[str, str]]]) -> list[Leftover]:
        try:
            tags = fetch()
        except NotFoundError:
            return []
        return [Leftover(kind, name)] if owned_by(tags, ctx.tagger) else []

    found = side_by_side(
        lambda: [Leftover(kind, rid) for kind, rid, _ in job_ec2_resources(aws, ctx)],
        lambda: iam_entity("iam-role", iam.role_tags(aws, name)),
        lambda: iam_entity("iam-instance-profile", iam.profile_tags(aws, name)),
        lambda: [Leftover("auto-scaling-group", n) for n in job_scaling_groups(aws, ctx.tagger)],
        lambda: [Leftover(kind, ident) for kind, ident in lb.leftovers(aws, ctx.tagger, ctx.infra)],
        lambda: [Leftover(kind, ident) for kind, ident in schedules.leftovers(aws, ctx)],
    )
    return [left for group in found for left in group]
