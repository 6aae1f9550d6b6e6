"""Deleting the job's network (stepDeleteNetwork), found by tag, so unrecorded leftovers of a crash go too.

An early step (`AwsDriver.early_steps`): the NAT gateway, whose deletion takes about a minute, and its
address go while the load balancer and the VMs are still being removed (the VMs lose egress, which a
teardown ends anyway); the rest waits for the steps before it (`ctx.wait_inputs`). Then route tables,
subnets and the internet gateway go side by side (none needs another gone), and the VPC last.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.network import LIVE_NAT_STATES, NAT_TIMEOUT, forget_nat
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters
from vmplane.clouds.base import Context
from vmplane.clouds.deletes import delete
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.waits import poll


def delete_network(aws: AwsClients, ctx: Context) -> None:
    infra, ec2, t = ctx.infra, aws.ec2, ctx.tagger
    if infra.NetworkID and not infra.NetworkCreated:
        ctx.log(f"leaving existing vpc {infra.NetworkID} untouched")
        # Still after the steps before it: an early step that ends is settled at once, and the leftover
        # check after it (stepUnregisterSpace) would otherwise run while the VMs are still going.
        ctx.wait_inputs()
        return

    nats = find_tagged(
        ec2.describe_nat_gateways, "NatGateways", [*job_filters(t), {"Name": "state", "Values": LIVE_NAT_STATES}]
    )
    for nat in nats:
        delete(partial(aws_call, ec2.delete_nat_gateway, NatGatewayId=nat["NatGatewayId"]), what="delete NAT")
    for nat in nats:
        _wait_nat_deleted(aws, nat["NatGatewayId"])
    forget_nat(ctx)
    ctx.save()

    for addr in find_tagged(ec2.describe_addresses, "Addresses", job_filters(t)):
        if addr.get("AssociationId"):
            delete(partial(aws_call, ec2.disassociate_address, AssociationId=addr["AssociationId"]), what="EIP")
        # The EIP stays "in use" until the NAT gateway's interface is gone.
        delete(partial(aws_call, ec2.release_address, AllocationId=addr["AllocationId"]), what="release EIP")
    aws_ids(infra).ElasticIPAllocationIDs = []
    ctx.save()

    ctx.wait_inputs()  # subnets, groups and the gateway are in use until the LB and the VMs are gone
    side_by_side(
        lambda: _delete_route_tables(aws, ctx),
        lambda: _delete_subnets(aws, ctx),
        lambda: _delete_internet_gateways(aws, ctx),
    )
    for vpc in find_tagged(ec2.describe_vpcs, "Vpcs", job_filters(t)):
        delete(partial(aws_call, ec2.delete_vpc, VpcId=vpc["VpcId"]), what=f"delete {vpc['VpcId']}")
    infra.NetworkID = None
    ctx.save()


def _delete_route_tables(aws: AwsClients, ctx: Context) -> None:
    tables = find_tagged(aws.ec2.describe_route_tables, "RouteTables", job_filters(ctx.tagger))
    # The VPC's main route table goes with the VPC.
    side_by_side(*(partial(_delete_route_table, aws, rt) for rt in tables if not _is_main(rt)))
    aws_ids(ctx.infra).PublicRouteTableID = aws_ids(ctx.infra).PrivateRouteTableID = None
    ctx.save()


def _is_main(rt: dict[str, Any]) -> bool:
    return any(a.get("Main") for a in rt.get("Associations", []))


def _delete_route_table(aws: AwsClients, rt: dict[str, Any]) -> None:
    ec2 = aws.ec2
    for assoc in rt.get("Associations", []):
        # NotFound (done) if its subnet was deleted meanwhile: a subnet's deletion drops its association.
        aid = assoc["RouteTableAssociationId"]
        delete(partial(aws_call, ec2.disassociate_route_table, AssociationId=aid), what=f"disassociate {aid}")
    rid = rt["RouteTableId"]
    delete(partial(aws_call, ec2.delete_route_table, RouteTableId=rid), what=f"delete {rid}")


def _delete_subnets(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    # Interfaces of just-terminated instances linger for a while: DependencyViolation until then.
    side_by_side(
        *(
            partial(
                delete, partial(aws_call, ec2.delete_subnet, SubnetId=s["SubnetId"]), what=f"delete {s['SubnetId']}"
            )
            for s in find_tagged(ec2.describe_subnets, "Subnets", job_filters(ctx.tagger))
        )
    )
    aws_ids(ctx.infra).PublicSubnetIDs, ctx.infra.VMSubnetIDs = [], []
    ctx.save()


def _delete_internet_gateways(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    for igw in find_tagged(ec2.describe_internet_gateways, "InternetGateways", job_filters(ctx.tagger)):
        gid = igw["InternetGatewayId"]
        # Both answer DependencyViolation ("mapped public addresses") while the NAT's EIP is released,
        # which on AWS can be minutes after DeleteNatGateway returned.
        for att in igw.get("Attachments", []):
            detach = partial(aws_call, ec2.detach_internet_gateway, InternetGatewayId=gid, VpcId=att["VpcId"])
            delete(detach, what=f"detach {gid}")
        delete(partial(aws_call, ec2.delete_internet_gateway, InternetGatewayId=gid), what=f"delete {gid}")
    aws_ids(ctx.infra).InternetGatewayID = None
    ctx.save()


def _wait_nat_deleted(aws: AwsClients, nat_id: str) -> None:
    def gone() -> bool | None:
        gws = aws_call(aws.ec2.describe_nat_gateways, NatGatewayIds=[nat_id]).get("NatGateways", [])
        return True if not gws or gws[0]["State"] in ("deleted", "failed") else None

    with contextlib.suppress(NotFoundError):
        poll(gone, what=f"NAT gateway {nat_id} deletion", timeout=NAT_TIMEOUT, first=0.1)
