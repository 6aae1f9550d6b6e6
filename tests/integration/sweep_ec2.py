"""The EC2 part of the sweep's inventory (tests/integration/sweep_inventory.py): VPCs and everything
inside them, NAT, EIPs, launch templates and instances, normalised the same way."""

from __future__ import annotations

import base64
import re
from typing import Any

from tests.helpers import Sandbox

LIVE_INSTANCE = ["pending", "running", "stopping", "stopped", "shutting-down"]
LIVE_NAT = ["pending", "available", "deleting"]
AWS_ID = re.compile(
    r"\b(?:vpc|subnet|sg|rtb|rtbassoc|igw|nat|eipalloc|eipassoc|lt|i|acl|aclassoc|eni|vol)-[0-9a-f]{8,17}\b"
)
CERT_ARN = re.compile(r"certificate/[0-9a-f-]{36}")


def tags_of(item: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", []) or []}


def has_job(item: dict[str, Any], job_id: str) -> bool:
    return tags_of(item).get("zop:jobId") == job_id


class Labels:
    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}

    def add(self, rid: str, kind: str, item: dict[str, Any], fallback: str = "untagged") -> None:
        tags = tags_of(item)
        self.by_id.setdefault(rid, f"{kind}:{tags.get('Name') or tags.get('zop:role') or fallback}")


def ec2_inventory(sb: Sandbox, job_id: str, labels: Labels) -> dict[str, Any]:
    ec2 = sb.client("ec2")
    job = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    vpcs = ec2.describe_vpcs(Filters=job)["Vpcs"]
    vpc_ids = [v["VpcId"] for v in vpcs]
    in_vpc = [{"Name": "vpc-id", "Values": vpc_ids}]

    def both(method: str, key: str, id_key: str, vpc_filter: list[dict[str, Any]] | None = None) -> list[Any]:
        found = {i[id_key]: i for i in getattr(ec2, method)(Filters=job)[key] if has_job(i, job_id)}
        if vpc_ids:
            found.update({i[id_key]: i for i in getattr(ec2, method)(Filters=vpc_filter or in_vpc)[key]})
        return list(found.values())

    subnets = both("describe_subnets", "Subnets", "SubnetId")
    rts = both("describe_route_tables", "RouteTables", "RouteTableId")
    sgs = both("describe_security_groups", "SecurityGroups", "GroupId")
    # Only the ACLs of live VPCs: moto keeps a VPC's default ACL (with its tags) after DeleteVpc, which
    # AWS deletes with the VPC; vmplane never creates an ACL of its own.
    acls = ec2.describe_network_acls(Filters=in_vpc)["NetworkAcls"] if vpc_ids else []
    igws = both(
        "describe_internet_gateways",
        "InternetGateways",
        "InternetGatewayId",
        [{"Name": "attachment.vpc-id", "Values": vpc_ids}],
    )
    # The sandbox ignores tag filters on DescribeNatGateways: re-check the tag, or match the VPC.
    nats = [
        n
        for n in ec2.describe_nat_gateways(Filters=[{"Name": "state", "Values": LIVE_NAT}])["NatGateways"]
        if has_job(n, job_id) or n.get("VpcId") in vpc_ids
    ]
    eips = [a for a in ec2.describe_addresses(Filters=job)["Addresses"] if has_job(a, job_id)]
    lts = [t for t in ec2.describe_launch_templates(Filters=job)["LaunchTemplates"] if has_job(t, job_id)]
    live = [{"Name": "instance-state-name", "Values": LIVE_INSTANCE}]
    instances = [
        i
        for r in ec2.describe_instances(Filters=[*job, *live])["Reservations"]
        for i in r["Instances"]
        if has_job(i, job_id)
    ]
    if vpc_ids:  # untagged instances in the VPC too (a launch that lost its tags would hide otherwise)
        seen = {i["InstanceId"] for i in instances}
        instances += [
            i
            for r in ec2.describe_instances(Filters=[*in_vpc, *live])["Reservations"]
            for i in r["Instances"]
            if i["InstanceId"] not in seen
        ]

    for v in vpcs:
        labels.add(v["VpcId"], "vpc", v)
    for s in subnets:
        labels.add(s["SubnetId"], "subnet", s)
    for rt in rts:
        main = any(a.get("Main") for a in rt.get("Associations", []))
        labels.add(rt["RouteTableId"], "rtb", rt, "main" if main else "untagged")
    for g in sgs:
        labels.add(g["GroupId"], "sg", g, g["GroupName"])
    for a in acls:
        labels.add(a["NetworkAclId"], "acl", a, "default" if a.get("IsDefault") else "untagged")
    for g in igws:
        labels.add(g["InternetGatewayId"], "igw", g)
    for n in nats:
        labels.add(n["NatGatewayId"], "nat", n)
    for a in eips:
        labels.add(a["AllocationId"], "eip", a)
    for t in lts:
        labels.add(t["LaunchTemplateId"], "lt", t, t["LaunchTemplateName"])
    for i in instances:
        labels.add(i["InstanceId"], "instance", i)

    def attr(vpc: str, name: str, key: str) -> bool:
        return bool(ec2.describe_vpc_attribute(VpcId=vpc, Attribute=name)[key]["Value"])

    versions = {
        t["LaunchTemplateName"]: [
            {"number": v["VersionNumber"], "default": v["DefaultVersion"], "data": _lt_data(v["LaunchTemplateData"])}
            for v in ec2.describe_launch_template_versions(LaunchTemplateId=t["LaunchTemplateId"])[
                "LaunchTemplateVersions"
            ]
        ]
        for t in lts
    }
    return {
        "vpcs": [
            {
                "vpc": v["VpcId"],
                "cidr": v["CidrBlock"],
                "dnsSupport": attr(v["VpcId"], "enableDnsSupport", "EnableDnsSupport"),
                "dnsHostnames": attr(v["VpcId"], "enableDnsHostnames", "EnableDnsHostnames"),
                "tags": tags_of(v),
            }
            for v in vpcs
        ],
        "subnets": [
            {
                "subnet": s["SubnetId"],
                "vpc": s["VpcId"],
                "cidr": s["CidrBlock"],
                "zone": s["AvailabilityZone"],
                "publicIps": s.get("MapPublicIpOnLaunch"),
                "tags": tags_of(s),
            }
            for s in subnets
        ],
        "route_tables": [
            {
                "rtb": rt["RouteTableId"],
                "routes": [{k: v for k, v in r.items() if k not in ("Origin", "State")} for r in rt.get("Routes", [])],
                "associations": [
                    {"main": a.get("Main", False), "subnet": a.get("SubnetId")} for a in rt.get("Associations", [])
                ],
                "tags": tags_of(rt),
            }
            for rt in rts
        ],
        "security_groups": [
            {
                "sg": g["GroupId"],
                "name": g["GroupName"],
                "description": g.get("Description"),
                "ingress": _perms(g.get("IpPermissions", [])),
                "egress": _perms(g.get("IpPermissionsEgress", [])),
                "tags": tags_of(g),
            }
            for g in sgs
        ],
        "network_acls": [{"acl": a["NetworkAclId"], "default": a.get("IsDefault"), "tags": tags_of(a)} for a in acls],
        "internet_gateways": [
            {
                "igw": g["InternetGatewayId"],
                "attachments": [{"vpc": a["VpcId"], "state": a.get("State")} for a in g.get("Attachments", [])],
                "tags": tags_of(g),
            }
            for g in igws
        ],
        "nat_gateways": [
            {
                "nat": n["NatGatewayId"],
                "state": n["State"],
                "subnet": n.get("SubnetId"),
                "eips": [a.get("AllocationId") for a in n.get("NatGatewayAddresses", [])],
                "tags": tags_of(n),
            }
            for n in nats
        ],
        "elastic_ips": [
            {"eip": a["AllocationId"], "associated": bool(a.get("AssociationId")), "tags": tags_of(a)} for a in eips
        ],
        "launch_templates": [
            {"name": t["LaunchTemplateName"], "versions": versions[t["LaunchTemplateName"]], "tags": tags_of(t)}
            for t in lts
        ],
        "instances": [
            {
                "state": i["State"]["Name"],
                "type": i.get("InstanceType"),
                "subnet": i.get("SubnetId"),
                "groups": sorted(g["GroupId"] for g in i.get("SecurityGroups", [])),
                "profile": (i.get("IamInstanceProfile") or {}).get("Arn"),
                "tags": {k: v for k, v in tags_of(i).items() if not k.startswith("aws:")},
            }
            for i in instances
        ],
    }


def _lt_data(data: dict[str, Any]) -> dict[str, Any]:
    # User data is base64: decode it so the env name inside it is normalised like everything else.
    if "UserData" in data:
        data = {**data, "UserData": base64.b64decode(data["UserData"]).decode()}
    return data


def _perms(perms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "proto": p.get("IpProtocol"),
            "from": p.get("FromPort"),
            "to": p.get("ToPort"),
            "cidrs": sorted(r["CidrIp"] for r in p.get("IpRanges", [])),
            "groups": sorted(g["GroupId"] for g in p.get("UserIdGroupPairs", [])),
        }
        for p in perms
    ]
