"""VPC, subnets, internet gateway, NAT gateway + EIP, route tables: create (find-by-tag first) and delete."""

from __future__ import annotations

import contextlib
import ipaddress
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from vmplane.clouds.aws import naming, tokens
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.security_groups import perm_rules
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_list, tag_spec
from vmplane.clouds.base import Context
from vmplane.clouds.ensure import ensure
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.steps import PUBLIC_NETWORK
from vmplane.clouds.waits import poll

NAT_TIMEOUT = 600.0
LIVE_NAT_STATES = ["pending", "available"]


def subnet_cidrs(vpc_cidr: str, zones: int) -> tuple[list[str], list[str]]:
    """Split the VPC evenly: the first `zones` blocks are public, the next `zones` private."""
    net = ipaddress.ip_network(vpc_cidr)
    bits = max(1, math.ceil(math.log2(2 * zones)))
    blocks = [str(b) for b in net.subnets(prefixlen_diff=bits)]
    if blocks and ipaddress.ip_network(blocks[0]).prefixlen > 28:
        raise InvalidRequestError(f"{vpc_cidr} is too small for {zones} zones of public and private subnets")
    return blocks[:zones], blocks[zones : 2 * zones]


def ensure_network(aws: AwsClients, ctx: Context) -> None:
    net = ctx.spec.network
    if net.existing_vpc_id:
        _adopt_existing(aws, ctx)
        return
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger

    def record_vpc(vpc_id: str) -> None:
        infra.NetworkID, aws_ids(infra).VpcCidr, infra.NetworkCreated = vpc_id, net.cidr, True

    ensure(
        ctx,
        f"vpc ({net.cidr})",
        get=lambda: infra.NetworkID or None,
        find=lambda: _first_id(ec2.describe_vpcs, "Vpcs", job_filters(t, "vpc"), "VpcId"),
        create=lambda: aws_call(
            ec2.create_vpc,
            CidrBlock=net.cidr,
            TagSpecifications=tag_spec("vpc", t.tags("vpc", naming.vpc_name(ctx.spec))),
        )["Vpc"]["VpcId"],
        put=record_vpc,
    )

    # The NAT gateway is the long wait (minutes on AWS): created as soon as a public subnet and the
    # internet gateway exist (a public NAT gateway in a VPC without one fails: Gateway.NotAttached), and
    # the rest of the network is built while it is pending.
    public_cidrs, private_cidrs = subnet_cidrs(net.cidr, len(infra.Zones))
    side_by_side(  # independent of each other; the NAT gateway needs all three
        lambda: _public_subnets(aws, ctx, public_cidrs),
        lambda: _internet_gateway(aws, ctx),
        lambda: _nat_address(aws, ctx),
    )
    if not aws_ids(infra).NatGatewayIDs:
        aws_ids(infra).NatGatewayIDs = [_ensure_nat(aws, ctx)]
        ctx.save()
    # An internet-facing load balancer and the launch templates need no more than this.
    ctx.reached(PUBLIC_NETWORK)

    side_by_side(
        # Outside the create branch on purpose: the VPC id is saved before these calls, so a crash between
        # them must not leave DNS off or the default group open on resume. Each call is idempotent.
        lambda: _configure_vpc(aws, ctx),
        lambda: _private_subnets(aws, ctx, private_cidrs),
        lambda: _public_route_table(aws, ctx),
    )
    if not aws_ids(infra).PrivateRouteTableID:
        _wait_nat_available(aws, ctx)
        aws_ids(infra).PrivateRouteTableID = _ensure_route_table(
            aws, ctx, "rt-private", infra.VMSubnetIDs, {"NatGatewayId": aws_ids(infra).NatGatewayIDs[0]}
        )
        ctx.save()


def _public_subnets(aws: AwsClients, ctx: Context, cidrs: list[str]) -> None:
    if len(aws_ids(ctx.infra).PublicSubnetIDs) != len(ctx.infra.Zones):
        aws_ids(ctx.infra).PublicSubnetIDs = _ensure_subnets(aws, ctx, "subnet-public", cidrs)
        ctx.save()


def _private_subnets(aws: AwsClients, ctx: Context, cidrs: list[str]) -> None:
    if len(ctx.infra.VMSubnetIDs) != len(ctx.infra.Zones):
        ctx.infra.VMSubnetIDs = _ensure_subnets(aws, ctx, "subnet-private", cidrs)
        ctx.save()


def _internet_gateway(aws: AwsClients, ctx: Context) -> None:
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    if aws_ids(infra).InternetGatewayID:
        return
    found = find_tagged(ec2.describe_internet_gateways, "InternetGateways", job_filters(t, "igw"))
    igw = (
        found[0]
        if found
        else aws_call(
            ec2.create_internet_gateway,
            TagSpecifications=tag_spec("internet-gateway", t.tags("igw", naming.igw_name(ctx.spec))),
        )["InternetGateway"]
    )
    if not any(a.get("VpcId") == infra.NetworkID for a in igw.get("Attachments", [])):
        aws_call(ec2.attach_internet_gateway, InternetGatewayId=igw["InternetGatewayId"], VpcId=infra.NetworkID)
    aws_ids(infra).InternetGatewayID = igw["InternetGatewayId"]
    ctx.save()


def _nat_address(aws: AwsClients, ctx: Context) -> None:
    """The NAT gateway's Elastic IP, found by tag or allocated (and saved) before the gateway."""
    ec2, t, ids = aws.ec2, ctx.tagger, aws_ids(ctx.infra)
    if ids.NatGatewayIDs:  # the gateway holds its address: nothing to allocate
        return

    def record(alloc: str) -> None:
        ids.ElasticIPAllocationIDs = [alloc]

    ensure(
        ctx,
        "nat elastic ip",
        get=lambda: ids.ElasticIPAllocationIDs[0] if ids.ElasticIPAllocationIDs else None,
        find=lambda: _first_id(ec2.describe_addresses, "Addresses", job_filters(t, "nat-eip"), "AllocationId"),
        create=lambda: aws_call(
            ec2.allocate_address,
            Domain="vpc",
            TagSpecifications=tag_spec("elastic-ip", t.tags("nat-eip", naming.nat_name(ctx.spec))),
        )["AllocationId"],
        put=record,
    )


def _first_id(
    describe: Callable[..., Mapping[str, Any]], key: str, filters: list[dict[str, Any]], id_key: str
) -> str | None:
    """The id of the first resource carrying the job's tags (find-by-tag), None when there is none."""
    found = find_tagged(describe, key, filters)
    return str(found[0][id_key]) if found else None


def _public_route_table(aws: AwsClients, ctx: Context) -> None:
    ids = aws_ids(ctx.infra)
    if not ids.PublicRouteTableID:
        gateway = {"GatewayId": str(ids.InternetGatewayID)}
        ids.PublicRouteTableID = _ensure_route_table(aws, ctx, "rt-public", ids.PublicSubnetIDs, gateway)
        ctx.save()


def _configure_vpc(aws: AwsClients, ctx: Context) -> None:
    vpc_id = ctx.infra.NetworkID
    # Private DNS names are needed by the SSM agent and most workloads.
    aws_call(aws.ec2.modify_vpc_attribute, VpcId=vpc_id, EnableDnsSupport={"Value": True})
    aws_call(aws.ec2.modify_vpc_attribute, VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    _tag_vpc_defaults(aws, ctx)


def _tag_vpc_defaults(aws: AwsClients, ctx: Context) -> None:
    """AWS creates a main route table, default security group and default ACL with every VPC; tag them
    too so every resource of the environment carries the tag set (they go away with the VPC)."""
    ec2, vpc = aws.ec2, [{"Name": "vpc-id", "Values": [ctx.infra.NetworkID]}]
    ids = [
        rt["RouteTableId"]
        for rt in aws_call(ec2.describe_route_tables, Filters=[*vpc, {"Name": "association.main", "Values": ["true"]}])[
            "RouteTables"
        ]
    ]
    default_groups = aws_call(
        ec2.describe_security_groups, Filters=[*vpc, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"]
    ids += [g["GroupId"] for g in default_groups]
    for g in default_groups:
        _empty_default_group(aws, g)
    ids += [
        a["NetworkAclId"]
        for a in aws_call(ec2.describe_network_acls, Filters=[*vpc, {"Name": "default", "Values": ["true"]}])[
            "NetworkAcls"
        ]
    ]
    if ids:
        aws_call(
            ec2.create_tags, Resources=ids, Tags=tag_list(ctx.tagger.tags("vpc-default", f"{ctx.spec.name}-default"))
        )


def _empty_default_group(aws: AwsClients, group: Mapping[str, Any]) -> None:
    """Nothing of vmplane's uses the VPC's default group: remove AWS's allow-all rules (CIS: the default
    group restricts all traffic), so a resource launched into it by mistake is unreachable."""
    gid = str(group["GroupId"])
    for key, revoke in (
        ("IpPermissions", aws.ec2.revoke_security_group_ingress),
        ("IpPermissionsEgress", aws.ec2.revoke_security_group_egress),
    ):
        perms = group.get(key) or []
        if perms:
            with contextlib.suppress(NotFoundError):
                aws_call(revoke, GroupId=gid, IpPermissions=perms)


def _adopt_existing(aws: AwsClients, ctx: Context) -> None:
    """Record an existing VPC and its private subnets; vmplane never modifies or deletes them."""
    net, infra = ctx.spec.network, ctx.infra
    vpcs = aws_call(aws.ec2.describe_vpcs, VpcIds=[net.existing_vpc_id])["Vpcs"]
    subnets = aws_call(aws.ec2.describe_subnets, SubnetIds=net.existing_private_subnet_ids)["Subnets"]
    foreign = [s["SubnetId"] for s in subnets if s["VpcId"] != net.existing_vpc_id]
    if foreign:
        raise InvalidRequestError(f"subnets {', '.join(foreign)} are not in {net.existing_vpc_id}")
    public_ips = [s["SubnetId"] for s in subnets if s.get("MapPublicIpOnLaunch")]
    if public_ips:
        raise InvalidRequestError(
            f"subnets {', '.join(public_ips)} assign public IPs on launch; VMs must be in private subnets"
        )
    infra.NetworkID, aws_ids(infra).VpcCidr, infra.NetworkCreated = vpcs[0]["VpcId"], vpcs[0]["CidrBlock"], False
    infra.VMSubnetIDs = [s["SubnetId"] for s in subnets]
    infra.Zones = [s["AvailabilityZone"] for s in subnets]
    if not aws_ids(infra).UserGroupRules:  # the first adoption's view: what drift compares the group with
        groups = aws_call(
            aws.ec2.describe_security_groups,
            Filters=[{"Name": "vpc-id", "Values": [infra.NetworkID]}, {"Name": "group-name", "Values": ["default"]}],
        )["SecurityGroups"]
        aws_ids(infra).UserGroupRules = {
            g["GroupId"]: {"ingress": perm_rules(g.get("IpPermissions", [])),
                           "egress": perm_rules(g.get("IpPermissionsEgress", []))}
            for g in groups
        }  # fmt: skip
    ctx.save()
    ctx.log(f"using existing vpc {infra.NetworkID} (not managed by vmplane)")


def _ensure_subnets(aws: AwsClients, ctx: Context, role: str, cidrs: list[str]) -> list[str]:
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    existing = {
        s["AvailabilityZone"]: s["SubnetId"] for s in find_tagged(ec2.describe_subnets, "Subnets", job_filters(t, role))
    }
    missing = [(zone, cidr) for zone, cidr in zip(infra.Zones, cidrs, strict=True) if zone not in existing]
    created = side_by_side(
        *(
            partial(
                aws_call,
                ec2.create_subnet,
                VpcId=infra.NetworkID,
                CidrBlock=cidr,
                AvailabilityZone=zone,
                TagSpecifications=tag_spec("subnet", t.tags(role, naming.subnet_name(ctx.spec, role, zone))),
            )
            for zone, cidr in missing
        )
    )
    existing.update({zone: out["Subnet"]["SubnetId"] for (zone, _), out in zip(missing, created, strict=True)})
    ids = [existing[zone] for zone in infra.Zones]
    ctx.log(f"{role}: {', '.join(ids)}")
    return ids


def _ensure_nat(aws: AwsClients, ctx: Context) -> str:
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    found = find_tagged(
        ec2.describe_nat_gateways, "NatGateways", [*job_filters(t, "nat"), {"Name": "state", "Values": LIVE_NAT_STATES}]
    )
    if found:
        nat_id = found[0]["NatGatewayId"]
        allocs = [a["AllocationId"] for a in found[0].get("NatGatewayAddresses", []) if a.get("AllocationId")]
        if allocs and not aws_ids(infra).ElasticIPAllocationIDs:
            aws_ids(infra).ElasticIPAllocationIDs = allocs
            ctx.save()
    else:
        _nat_address(aws, ctx)  # normally allocated beside the subnets already
        nat_id = aws_call(
            ec2.create_nat_gateway,
            SubnetId=aws_ids(infra).PublicSubnetIDs[0],
            AllocationId=aws_ids(infra).ElasticIPAllocationIDs[0],
            # Same token on a resumed step; a new attempt after a failed gateway, which AWS would hand back.
            ClientToken=tokens.nat_gateway_token(ctx.job_id, aws_ids(infra).NatAttempt),
            TagSpecifications=tag_spec("natgateway", t.tags("nat", naming.nat_name(ctx.spec))),
        )["NatGateway"]["NatGatewayId"]
    ctx.log(f"nat {nat_id} created (pending)")
    return str(nat_id)


def forget_nat(ctx: Context) -> None:
    """The recorded NAT gateway is gone or failed: the next create is a new attempt, with a new token.
    Nothing recorded, nothing bumped: a re-run after the save leaves the state a clean run leaves."""
    ids = aws_ids(ctx.infra)
    if ids.NatGatewayIDs:
        ids.NatGatewayIDs, ids.NatAttempt = [], ids.NatAttempt + 1


def _wait_nat_available(aws: AwsClients, ctx: Context) -> None:
    """Before the private route table points at it. A failed gateway is forgotten, so the resumed step
    creates a new one (the failed one is no longer found as live)."""
    nat_id = aws_ids(ctx.infra).NatGatewayIDs[0]

    def available() -> str | None:
        gw = aws_call(aws.ec2.describe_nat_gateways, NatGatewayIds=[nat_id])["NatGateways"][0]
        if gw["State"] == "failed":
            forget_nat(ctx)
            ctx.save()
            raise InvalidRequestError(f"NAT gateway {nat_id} failed: {gw.get('FailureMessage', 'no reason given')}")
        return nat_id if gw["State"] == "available" else None

    poll(available, what=f"NAT gateway {nat_id}", timeout=NAT_TIMEOUT, first=0.1)
    ctx.log(f"nat {nat_id} available")


def _ensure_route_table(aws: AwsClients, ctx: Context, role: str, subnet_ids: list[str], target: dict[str, str]) -> str:
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    found = find_tagged(ec2.describe_route_tables, "RouteTables", job_filters(t, role))
    rt = (
        found[0]
        if found
        else aws_call(
            ec2.create_route_table,
            VpcId=infra.NetworkID,
            TagSpecifications=tag_spec("route-table", t.tags(role, naming.route_table_name(ctx.spec, role))),
        )["RouteTable"]
    )
    rt_id = rt["RouteTableId"]
    ensure_default_route(aws, rt_id, rt.get("Routes", []), target)
    associated = {a.get("SubnetId") for a in rt.get("Associations", [])}
    side_by_side(
        *(
            partial(aws_call, ec2.associate_route_table, RouteTableId=rt_id, SubnetId=subnet_id)
            for subnet_id in subnet_ids
            if subnet_id not in associated
        )
    )
    return str(rt_id)


def ensure_default_route(
    aws: AwsClients, rt_id: str, current: Sequence[Mapping[str, Any]], target: dict[str, str]
) -> bool:
    """0.0.0.0/0 -> `target` in the table: created, or replaced when it points elsewhere (a NAT gateway
    made again after one was deleted leaves a blackhole route to the old one). True if it was changed."""
    ((key, want),) = target.items()
    default = next((r for r in current if r.get("DestinationCidrBlock") == "0.0.0.0/0"), None)
    if default is not None and default.get(key) == want:
        return False
    if default is None:
        with contextlib.suppress(ConflictError):  # RouteAlreadyExists after a crash before the checkpoint
            aws_call(aws.ec2.create_route, RouteTableId=rt_id, DestinationCidrBlock="0.0.0.0/0", **target)
    else:
        aws_call(aws.ec2.replace_route, RouteTableId=rt_id, DestinationCidrBlock="0.0.0.0/0", **target)
    return True
