"""Everything still tagged with a job id: what `destroy` must leave none of."""

from __future__ import annotations

from functools import partial

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.resources import TABLE
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import job_filters, matches_tag_filters
from vmplane.clouds.base import Context, Leftover
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
    """What `destroy` must leave none of: everything the resource table observes as the job's (one lookup
    per kind, side by side)."""
    aws_ids(ctx.infra)  # the record's AWS part exists before the lookups read it side by side
    return TABLE.leftovers(aws, ctx)
