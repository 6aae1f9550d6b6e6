"""EC2 tags and security-group names: AWS's limits on tags (50 per resource, `aws:` reserved, key 128
and value 256 characters) and the CreateSecurityGroup and rule-description constraints, none of which
moto checks (EC2's model states no lengths or patterns, so the strict layer cannot either)."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients
from vmplane.sandbox.aws.rules._common import (
    EC2_API,
    EC2_ERRORS,
    EC2_TAG_RULES,
    ec2,
    ec2_tags,
    fault,
    group,
    make_rule,
    over,
    p,
    request,
    reserved_key,
    vpc,
)

TAGGING = ("CreateTags", "RunInstances", "CreateVpc", "CreateSubnet", "CreateSecurityGroup", "CreateInternetGateway",
           "CreateRouteTable", "CreateNatGateway", "AllocateAddress", "CreateLaunchTemplate", "CreateNetworkInterface",
           "CreateKeyPair", "CreateVolume", "CreateImage")  # fmt: skip
# CreateSecurityGroup's GroupName and Description in a VPC, and a rule's Description (API reference).
_GROUP_TEXT = re.compile(r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*")


def _existing_tags(req: AwsRequest, resource_id: str) -> int:
    return len(ec2(req).tags.get(resource_id, {}))


def _over_50(req: AwsRequest) -> AwsFault | None:
    if req.operation == "CreateTags":
        for rid in p(req, "Resources") or ():
            new = {k for k, _ in ec2_tags(req)[0]}
            kept = set(ec2(req).tags.get(rid, {}))
            if len(kept | new) > 50:
                return fault("TagLimitExceeded", f"The maximum number of Tags for resource {rid} has been reached.")
        return None
    if over(ec2_tags(req), 50) is not None:
        return fault("TagLimitExceeded", "The maximum number of Tags for a resource has been reached.")
    return None


def _ex_over_50(clients: Clients) -> AwsRequest:
    v = vpc(clients)
    clients("ec2").create_tags(Resources=[v], Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(45)])
    return request("ec2", "CreateTags", Resources=[v], Tags=[{"Key": f"n{i}", "Value": "v"} for i in range(6)])


def _reserved(req: AwsRequest) -> AwsFault | None:
    key = reserved_key(ec2_tags(req))
    if key is not None:
        return fault(
            "InvalidParameterValue",
            f"Value ( {key} ) for parameter key is invalid. "
            "Tag keys starting with 'aws:' are reserved for internal use",
        )
    return None


def _ex_reserved(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateTags", Resources=[vpc(clients)], Tags=[{"Key": "aws:owner", "Value": "me"}])


def _ex_reserved_at_create(clients: Clients) -> AwsRequest:
    spec = [{"ResourceType": "vpc", "Tags": [{"Key": "AWS:env", "Value": "x"}]}]
    return request("ec2", "CreateVpc", CidrBlock="10.1.0.0/16", TagSpecifications=spec)


def _lengths(req: AwsRequest, which: int, limit: int, what: str) -> AwsFault | None:
    for tags in ec2_tags(req):
        for pair in tags:
            if len(pair[which]) > limit:
                return fault("InvalidParameterValue", f"Tag {what} exceeds the maximum length of {limit} characters")
    return None


def _ex_long_key(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateTags", Resources=[vpc(clients)], Tags=[{"Key": "k" * 129, "Value": "v"}])


def _ex_long_value(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateTags", Resources=[vpc(clients)], Tags=[{"Key": "k", "Value": "v" * 257}])


def _group_name(req: AwsRequest) -> AwsFault | None:
    name = str(p(req, "GroupName", ""))
    if name.lower().startswith("sg-"):
        return fault("InvalidParameterValue", "Group names may not be in the format sg-*.")
    if len(name) > 255:
        return fault("InvalidParameterValue", "Invalid value for parameter GroupName: must be 255 characters or less")
    if p(req, "VpcId") and not _GROUP_TEXT.fullmatch(name):
        return fault(
            "InvalidParameterValue",
            f"Value ({name}) for parameter GroupName is invalid. Character sets beyond ASCII are not supported.",
        )
    return None


def _ex_group_sg(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateSecurityGroup", GroupName="sg-web", Description="d", VpcId=vpc(clients))


def _ex_group_chars(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateSecurityGroup", GroupName="web\u00e9", Description="d", VpcId=vpc(clients))


def _group_description(req: AwsRequest) -> AwsFault | None:
    text = str(p(req, "Description", ""))
    if len(text) > 255 or not _GROUP_TEXT.fullmatch(text):
        return fault("InvalidParameterValue", f"Invalid security group description: {text[:40]!r}")
    return None


def _ex_group_description(clients: Clients) -> AwsRequest:
    return request("ec2", "CreateSecurityGroup", GroupName="web", Description="web's <group>", VpcId=vpc(clients))


def _descriptions(permissions: Any) -> list[str]:
    found = []
    for perm in permissions or ():
        for key in ("IpRanges", "Ipv6Ranges", "UserIdGroupPairs", "PrefixListIds"):
            found += [str(r["Description"]) for r in perm.get(key) or () if "Description" in r]
    return found


def _rule_description(req: AwsRequest) -> AwsFault | None:
    for text in _descriptions(p(req, "IpPermissions")):
        if len(text) > 255 or not _GROUP_TEXT.fullmatch(text):
            return fault("InvalidParameterValue", f"Invalid rule description: {text[:40]!r}")
    return None


def _ex_rule_description(clients: Clients) -> AwsRequest:
    perms = [
        {
            "IpProtocol": "tcp",
            "FromPort": 22,
            "ToPort": 22,
            "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "ops' ssh"}],
        }
    ]
    return request("ec2", "AuthorizeSecurityGroupIngress", GroupId=group(clients, vpc(clients)), IpPermissions=perms)


def _port_range(req: AwsRequest) -> AwsFault | None:
    for perm in p(req, "IpPermissions") or ():
        proto = str(perm.get("IpProtocol", "")).lower()
        if proto in ("tcp", "udp", "6", "17"):
            low, high = perm.get("FromPort"), perm.get("ToPort")
            if low is None or high is None or not (0 <= low <= high <= 65535):
                return fault(
                    "InvalidParameterValue", f"Invalid value for portRange. ({low}, {high}) is not a valid port range."
                )
    return None


def _ex_port_range(clients: Clients) -> AwsRequest:
    perms = [{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 80, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}]
    return request("ec2", "AuthorizeSecurityGroupIngress", GroupId=group(clients, vpc(clients)), IpPermissions=perms)


_rule = partial(make_rule, "ec2")


_PERMS = ("AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress")
RULES = (
    _rule("tags-over-50", TAGGING, "A resource holds at most 50 tags (with those it has)", EC2_ERRORS, _over_50,
          "TagLimitExceeded", _ex_over_50),
    _rule("tag-key-aws-prefix", ("CreateTags",), "Tag keys starting with aws: are reserved",
          "https://github.com/AndrewFarley/AWS-Automated-Daily-Instance-AMI-Snapshots/issues/7", _reserved,
          "InvalidParameterValue", _ex_reserved),
    _rule("tag-key-aws-prefix-at-create", tuple(o for o in TAGGING if o != "CreateTags"),
          "Tag keys starting with aws: (any case) are reserved in TagSpecifications too",
          "https://github.com/jcjorel/ec2-spot-converter/issues/13", _reserved, "InvalidParameterValue",
          _ex_reserved_at_create),
    _rule("tag-key-length", TAGGING, "A tag key has at most 128 characters", EC2_TAG_RULES,
          lambda r: _lengths(r, 0, 128, "key"), "InvalidParameterValue", _ex_long_key),
    _rule("tag-value-length", TAGGING, "A tag value has at most 256 characters", EC2_TAG_RULES,
          lambda r: _lengths(r, 1, 256, "value"), "InvalidParameterValue", _ex_long_value),
    _rule("group-name-sg-prefix", ("CreateSecurityGroup",), "A security group name cannot start with sg-",
          EC2_API.format("CreateSecurityGroup"), _group_name, "InvalidParameterValue", _ex_group_sg),
    _rule("group-name-characters", ("CreateSecurityGroup",),
          "A VPC security group name uses a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$* only, 255 at most",
          EC2_API.format("CreateSecurityGroup"), _group_name, "InvalidParameterValue", _ex_group_chars),
    _rule("group-description-characters", ("CreateSecurityGroup",),
          "A VPC security group description uses the same characters, 255 at most",
          EC2_API.format("CreateSecurityGroup"), _group_description, "InvalidParameterValue", _ex_group_description),
    _rule("rule-description-characters", (*_PERMS, "UpdateSecurityGroupRuleDescriptionsIngress"),
          "A rule's description uses the same characters, 255 at most", EC2_API.format("IpRange"),
          _rule_description, "InvalidParameterValue", _ex_rule_description),
    _rule("rule-port-range", _PERMS, "A TCP/UDP rule needs FromPort <= ToPort within 0-65535",
          EC2_API.format("IpPermission"), _port_range, "InvalidParameterValue", _ex_port_range),
)  # fmt: skip
