"""EC2 addresses and routes: an Elastic IP needs an internet gateway and cannot be released while
associated; a route table routes a destination once, to a gateway of its own VPC; the main table stays."""

from __future__ import annotations

from functools import partial
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import (
    EC2_API,
    EC2_ERRORS,
    ec2,
    eni_live,
    fault,
    igw,
    instance,
    make_rule,
    p,
    request,
    subnet,
    vpc,
)


def _address(req: AwsRequest) -> Any:
    for address in ec2(req).addresses:
        if address.allocation_id == p(req, "AllocationId") or address.public_ip == p(req, "PublicIp"):
            return address
    return None


def _release_associated(req: AwsRequest) -> AwsFault | None:
    address = _address(req)
    eni = address.eni if address is not None else None
    held = eni is not None and eni_live(req, eni)
    if address is not None and (
        held or (address.instance is not None and address.instance._state.name != "terminated")
    ):
        return fault("InvalidIPAddress.InUse", f"Address {address.public_ip} is in use.")
    return None


def _ex_release_associated(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    igw(clients, v)
    iid = instance(clients, subnet(clients, v, "10.0.1.0/24"))
    alloc = clients("ec2").allocate_address(Domain="vpc")["AllocationId"]
    clients("ec2").associate_address(AllocationId=alloc, InstanceId=iid)
    return request("ec2", "ReleaseAddress", AllocationId=alloc)


def _vpc_of_target(req: AwsRequest) -> str | None:
    backend = ec2(req)
    if p(req, "NetworkInterfaceId"):
        eni = backend.enis.get(p(req, "NetworkInterfaceId"))
        return str(eni.subnet.vpc_id) if eni is not None else None
    if p(req, "InstanceId"):
        for reservation in backend.reservations.values():
            for inst in reservation.instances:
                if inst.id == p(req, "InstanceId") and inst.subnet_id:
                    return str(backend.get_subnet(inst.subnet_id).vpc_id)
    return None


def _associate_no_igw(req: AwsRequest) -> AwsFault | None:
    vid = _vpc_of_target(req)
    if vid and not any(gw.vpc is not None and gw.vpc.id == vid for gw in ec2(req).internet_gateways.values()):
        return fault("Gateway.NotAttached", f"Network {vid} is not attached to any internet gateway")
    return None


def _ex_associate_no_igw(clients: Clients) -> AwsRequest:
    iid = instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))
    alloc = clients("ec2").allocate_address(Domain="vpc")["AllocationId"]
    return request("ec2", "AssociateAddress", AllocationId=alloc, InstanceId=iid)


def _delete_main_route_table(req: AwsRequest) -> AwsFault | None:
    table = ec2(req).route_tables.get(p(req, "RouteTableId"))
    if table is not None and table.main_association_id is not None:
        return fault("DependencyViolation", f"The routeTable '{table.id}' has dependencies and cannot be deleted.")
    return None


def _ex_delete_main_route_table(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    tables = clients("ec2").describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [v]}])["RouteTables"]
    return request("ec2", "DeleteRouteTable", RouteTableId=tables[0]["RouteTableId"])


def _route_igw_other_vpc(req: AwsRequest) -> AwsFault | None:
    backend = ec2(req)
    table = backend.route_tables.get(p(req, "RouteTableId"))
    gw = backend.internet_gateways.get(p(req, "GatewayId") or "")
    if table is not None and gw is not None and (gw.vpc is None or gw.vpc.id != table.vpc_id):
        return fault(
            "InvalidParameterValue", f"route table {table.id} and network gateway {gw.id} belong to different networks"
        )
    return None


def _ex_route_igw_other_vpc(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    gw = igw(clients)
    table = clients("ec2").create_route_table(VpcId=v)["RouteTable"]["RouteTableId"]
    return request("ec2", "CreateRoute", RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=gw)


_rule = partial(make_rule, "ec2")


RULES = (
    _rule(
        "release-address-associated",
        "ReleaseAddress",
        "An Elastic IP still associated cannot be released",
        EC2_API.format("ReleaseAddress"),
        _release_associated,
        "InvalidIPAddress.InUse",
        _ex_release_associated,
    ),
    _rule(
        "associate-address-without-gateway",
        "AssociateAddress",
        "An Elastic IP cannot be associated in a VPC with no internet gateway attached",
        EC2_ERRORS,
        _associate_no_igw,
        "Gateway.NotAttached",
        _ex_associate_no_igw,
    ),
    _rule(
        "delete-main-route-table",
        "DeleteRouteTable",
        "A VPC's main route table cannot be deleted",
        EC2_API.format("DeleteRouteTable"),
        _delete_main_route_table,
        "DependencyViolation",
        _ex_delete_main_route_table,
    ),
    _rule(
        "route-to-gateway-of-another-vpc",
        "CreateRoute",
        "A route to an internet gateway not attached to the table's VPC is refused",
        "https://github.com/smoketurner/serverless-vpc-plugin/issues/147",
        _route_igw_other_vpc,
        "InvalidParameterValue",
        _ex_route_igw_other_vpc,
    ),
)
