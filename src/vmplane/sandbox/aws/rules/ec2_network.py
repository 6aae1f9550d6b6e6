"""EC2 networking: deleting or detaching what is still in use, and the gateway a public address needs.

moto deletes a VPC with an attached gateway or its own security groups, a subnet with interfaces in it,
a group another group's rules name, and detaches a gateway while addresses in the VPC are mapped; AWS
refuses each with DependencyViolation (the API reference of each call; errors-overview lists the code)."""

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
    group,
    igw,
    instance,
    live_enis,
    make_rule,
    p,
    request,
    subnet,
    vpc,
)


def _mapped_addresses(req: AwsRequest, vpc_id: str) -> list[Any]:
    mapped = []
    for address in ec2(req).addresses:
        eni = address.eni or (address.instance.nics[0] if address.instance and address.instance.nics else None)
        if eni is not None and eni_live(req, eni) and eni.subnet.vpc_id == vpc_id:
            mapped.append(address)
    return mapped


def _detach_igw_mapped(req: AwsRequest) -> AwsFault | None:
    vpc_id = p(req, "VpcId")
    if _mapped_addresses(req, vpc_id):
        return fault(
            "DependencyViolation",
            f"Network {vpc_id} has some mapped public address(es). Please unmap those public address(es) "
            "before detaching the gateway.",
        )
    return None


def _ex_detach_igw_mapped(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    gw = igw(clients, v)
    eni = clients("ec2").create_network_interface(SubnetId=subnet(clients, v, "10.0.1.0/24"))["NetworkInterface"]
    alloc = clients("ec2").allocate_address(Domain="vpc")["AllocationId"]
    clients("ec2").associate_address(AllocationId=alloc, NetworkInterfaceId=eni["NetworkInterfaceId"])
    return request("ec2", "DetachInternetGateway", InternetGatewayId=gw, VpcId=v)


def _enis_with_group(req: AwsRequest, group_id: str) -> list[Any]:
    return [eni for eni in live_enis(req) if any(g.id == group_id for g in eni.group_set)]


def _referencing_groups(req: AwsRequest, group_id: str) -> list[str]:
    found = []
    for groups in ec2(req).groups.values():
        for other in groups.values():
            if other.id == group_id:
                continue
            for rule in [*other.ingress_rules, *other.egress_rules]:
                if (rule.source_group or {}).get("GroupId") == group_id:
                    found.append(other.id)
    return found


def _group_id(req: AwsRequest) -> str | None:
    gid = p(req, "GroupId")
    if gid:
        return str(gid)
    name = p(req, "GroupName")
    found = ec2(req).get_security_group_by_name_or_id(name, None) if name else None
    return str(found.id) if found else None


def _delete_sg_referenced(req: AwsRequest) -> AwsFault | None:
    gid = _group_id(req)
    if gid and _referencing_groups(req, gid):
        return fault("DependencyViolation", f"resource {gid} has a dependent object")
    return None


def _ex_delete_sg_referenced(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    a, b = group(clients, v, "a"), group(clients, v, "b")
    clients("ec2").authorize_security_group_ingress(
        GroupId=b,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "UserIdGroupPairs": [{"GroupId": a}]}],
    )
    return request("ec2", "DeleteSecurityGroup", GroupId=a)


def _delete_sg_attached(req: AwsRequest) -> AwsFault | None:
    gid = _group_id(req)
    if gid and _enis_with_group(req, gid):
        return fault("DependencyViolation", f"resource {gid} has a dependent object")
    return None


def _ex_delete_sg_attached(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    g = group(clients, v)
    instance(clients, subnet(clients, v, "10.0.1.0/24"), [g])
    return request("ec2", "DeleteSecurityGroup", GroupId=g)


def _delete_sg_default(req: AwsRequest) -> AwsFault | None:
    gid = _group_id(req)
    for groups in ec2(req).groups.values():
        found = groups.get(gid) if gid else None
        if found is not None and found.name == "default" and found.vpc_id:
            return fault("CannotDelete", f'the specified group: "{gid}" name: "default" cannot be deleted by a user')
    return None


def _ex_delete_sg_default(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    found = clients("ec2").describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [v]}, {"Name": "group-name", "Values": ["default"]}]
    )
    return request("ec2", "DeleteSecurityGroup", GroupId=found["SecurityGroups"][0]["GroupId"])


def _delete_subnet_in_use(req: AwsRequest) -> AwsFault | None:
    sid = p(req, "SubnetId")
    if any(eni.subnet.id == sid for eni in live_enis(req)):
        return fault("DependencyViolation", f"The subnet '{sid}' has dependencies and cannot be deleted.")
    return None


def _ex_delete_subnet_in_use(clients: Clients) -> AwsRequest:
    s = subnet(clients, vpc(clients), "10.0.1.0/24")
    instance(clients, s)
    return request("ec2", "DeleteSubnet", SubnetId=s)


def _delete_vpc_igw(req: AwsRequest) -> AwsFault | None:
    vid = p(req, "VpcId")
    if any(gw.vpc is not None and gw.vpc.id == vid for gw in ec2(req).internet_gateways.values()):
        return fault("DependencyViolation", f"The vpc '{vid}' has dependencies and cannot be deleted.")
    return None


def _ex_delete_vpc_igw(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    igw(clients, v)
    return request("ec2", "DeleteVpc", VpcId=v)


def _delete_vpc_groups(req: AwsRequest) -> AwsFault | None:
    vid = p(req, "VpcId")
    if any(g.name != "default" for g in ec2(req).groups.get(vid, {}).values()):
        return fault("DependencyViolation", f"The vpc '{vid}' has dependencies and cannot be deleted.")
    return None


def _ex_delete_vpc_groups(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    group(clients, v)
    return request("ec2", "DeleteVpc", VpcId=v)


def _delete_eni_in_use(req: AwsRequest) -> AwsFault | None:
    eni = ec2(req).enis.get(p(req, "NetworkInterfaceId"))
    if eni is not None and eni.instance is not None and eni_live(req, eni):
        return fault("InvalidNetworkInterface.InUse", f"Interface: [{eni.id}] in use.")
    return None


def _ex_delete_eni_in_use(clients: Clients) -> AwsRequest:
    iid = instance(clients, subnet(clients, vpc(clients), "10.0.1.0/24"))
    desc = clients("ec2").describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    return request(
        "ec2", "DeleteNetworkInterface", NetworkInterfaceId=desc["NetworkInterfaces"][0]["NetworkInterfaceId"]
    )


def _nat_subnet_delete(req: AwsRequest) -> AwsFault | None:
    sid = p(req, "SubnetId")
    live = [n for n in ec2(req).nat_gateways.values() if n.subnet_id == sid and n.state in ("pending", "available")]
    if live:
        return fault("DependencyViolation", f"The subnet '{sid}' has dependencies and cannot be deleted.")
    return None


def _ex_nat_subnet_delete(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    igw(clients, v)
    s = subnet(clients, v, "10.0.1.0/24")
    alloc = clients("ec2").allocate_address(Domain="vpc")["AllocationId"]
    clients("ec2").create_nat_gateway(SubnetId=s, AllocationId=alloc)
    return request("ec2", "DeleteSubnet", SubnetId=s)


_rule = partial(make_rule, "ec2")


RULES = (
    _rule(
        "detach-igw-with-mapped-address",
        "DetachInternetGateway",
        "Detaching an internet gateway while an Elastic IP in the VPC is mapped is refused",
        EC2_API.format("DetachInternetGateway"),
        _detach_igw_mapped,
        "DependencyViolation",
        _ex_detach_igw_mapped,
    ),
    _rule(
        "delete-group-referenced",
        "DeleteSecurityGroup",
        "A security group that another group's rules reference cannot be deleted",
        EC2_API.format("DeleteSecurityGroup"),
        _delete_sg_referenced,
        "DependencyViolation",
        _ex_delete_sg_referenced,
    ),
    _rule(
        "delete-group-attached",
        "DeleteSecurityGroup",
        "A security group attached to an instance or network interface cannot be deleted",
        EC2_API.format("DeleteSecurityGroup"),
        _delete_sg_attached,
        "DependencyViolation",
        _ex_delete_sg_attached,
    ),
    _rule(
        "delete-default-group",
        "DeleteSecurityGroup",
        "A VPC's default security group cannot be deleted",
        EC2_ERRORS,
        _delete_sg_default,
        "CannotDelete",
        _ex_delete_sg_default,
    ),
    _rule(
        "delete-subnet-in-use",
        "DeleteSubnet",
        "A subnet with instances or network interfaces in it cannot be deleted",
        EC2_API.format("DeleteSubnet"),
        _delete_subnet_in_use,
        "DependencyViolation",
        _ex_delete_subnet_in_use,
    ),
    _rule(
        "delete-subnet-with-nat",
        "DeleteSubnet",
        "A subnet holding a NAT gateway that is not deleted cannot be deleted",
        EC2_API.format("DeleteSubnet"),
        _nat_subnet_delete,
        "DependencyViolation",
        _ex_nat_subnet_delete,
    ),
    _rule(
        "delete-vpc-with-gateway",
        "DeleteVpc",
        "A VPC with an internet gateway attached cannot be deleted",
        EC2_API.format("DeleteVpc"),
        _delete_vpc_igw,
        "DependencyViolation",
        _ex_delete_vpc_igw,
    ),
    _rule(
        "delete-vpc-with-groups",
        "DeleteVpc",
        "A VPC with security groups other than its default cannot be deleted",
        EC2_API.format("DeleteVpc"),
        _delete_vpc_groups,
        "DependencyViolation",
        _ex_delete_vpc_groups,
    ),
    _rule(
        "delete-interface-in-use",
        "DeleteNetworkInterface",
        "A network interface attached to an instance cannot be deleted",
        EC2_ERRORS,
        _delete_eni_in_use,
        "InvalidNetworkInterface.InUse",
        _ex_delete_eni_in_use,
    ),
)
