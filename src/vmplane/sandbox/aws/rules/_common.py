"""What the catalogue's modules share: moto's state for a request, AWS's documentation addresses, tag and
name checks several services answer alike, and the setup most examples start from."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients, Rule

EC2_ERRORS = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"
EC2_API = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_{}.html"
ELB_API = "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_{}.html"
TAG_RULES = "https://docs.aws.amazon.com/tag-editor/latest/userguide/best-practices-and-strats.html"
EC2_TAG_RULES = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions"
# Services whose moto backend has one partition for the account, not one per region.
_GLOBAL = {"iam", "route53", "s3"}


def backend(service: str, req: AwsRequest) -> Any:
    """moto's backend of the request's account and region (imported late: moto is the sandbox's only)."""
    from moto.backends import get_backend

    return get_backend(service)[req.account]["global" if service in _GLOBAL else req.region]  # type: ignore[call-overload]


def ec2(req: AwsRequest) -> Any:
    return backend("ec2", req)


def fault(code: str, message: str, status: int = 400) -> AwsFault:
    return AwsFault(code, message, status)


def p(req: AwsRequest, name: str, default: Any = None) -> Any:
    return req.params.get(name, default)


def tags_of(items: Iterable[Mapping[str, Any]] | None) -> list[tuple[str, str]]:
    return [(str(t.get("Key", "")), str(t.get("Value", ""))) for t in items or ()]


def ec2_tags(req: AwsRequest) -> list[list[tuple[str, str]]]:
    """Each tag set a request gives: CreateTags' Tags, or each TagSpecification's."""
    if req.operation == "CreateTags":
        return [tags_of(p(req, "Tags"))]
    return [tags_of(spec.get("Tags")) for spec in p(req, "TagSpecifications") or ()]


def reserved_key(sets: Iterable[Sequence[tuple[str, str]]]) -> str | None:
    for tags in sets:
        for key, _ in tags:
            if key.lower().startswith("aws:"):
                return key
    return None


def over(sets: Iterable[Sequence[tuple[str, str]]], limit: int, existing: int = 0) -> int | None:
    for tags in sets:
        if existing + len({k for k, _ in tags}) > limit:
            return existing + len(tags)
    return None


def elb_name_problem(name: str, *, lb: bool) -> str | None:
    """ELB's name rule for load balancers and target groups (the API reference's Name member)."""
    if not 1 <= len(name) <= 32:
        return "must have a maximum of 32 characters"
    if not re.fullmatch(r"[A-Za-z0-9-]+", name):
        return "must contain only alphanumeric characters or hyphens"
    if name.startswith("-") or name.endswith("-"):
        return "must not begin or end with a hyphen"
    if lb and name.startswith("internal-"):
        return "must not begin with 'internal-'"
    return None


def vpc(clients: Clients, cidr: str = "10.0.0.0/16") -> str:
    return str(clients("ec2").create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"])


def subnet(clients: Clients, vpc_id: str, cidr: str, az: str = "us-east-1a") -> str:
    made = clients("ec2").create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)
    return str(made["Subnet"]["SubnetId"])


def igw(clients: Clients, vpc_id: str | None = None) -> str:
    ec2c = clients("ec2")
    gw = str(ec2c.create_internet_gateway()["InternetGateway"]["InternetGatewayId"])
    if vpc_id:
        ec2c.attach_internet_gateway(InternetGatewayId=gw, VpcId=vpc_id)
    return gw


def group(clients: Clients, vpc_id: str, name: str = "g1") -> str:
    return str(clients("ec2").create_security_group(GroupName=name, Description="d", VpcId=vpc_id)["GroupId"])


def ami(clients: Clients) -> str:
    return str(clients("ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


def instance(clients: Clients, subnet_id: str, groups: Sequence[str] = ()) -> str:
    kw: dict[str, Any] = {"SecurityGroupIds": list(groups)} if groups else {}
    made = clients("ec2").run_instances(
        ImageId=ami(clients), MinCount=1, MaxCount=1, InstanceType="t3.micro", SubnetId=subnet_id, **kw
    )
    return str(made["Instances"][0]["InstanceId"])


def eni_live(req: AwsRequest, eni: Any) -> bool:
    """Whether an interface still exists on AWS. moto keeps a terminated instance's interface and a deleted
    NAT gateway's (with its address mapped) where AWS deletes them: counting those would block a
    teardown forever."""
    inst = getattr(eni, "instance", None)
    if inst is not None and inst._state.name == "terminated":
        return False
    for nat in ec2(req).nat_gateways.values():
        if getattr(nat, "_eni", None) is eni and nat.state in ("deleting", "deleted", "failed"):
            return False
    return True


def live_enis(req: AwsRequest) -> list[Any]:
    return [eni for eni in ec2(req).enis.values() if eni_live(req, eni)]


def instance_state(req: AwsRequest, instance_id: str) -> str | None:
    """The instance's state name in moto, or None when moto has no such instance."""
    for reservation in ec2(req).reservations.values():
        for inst in reservation.instances:
            if inst.id == instance_id:
                return str(inst._state.name)
    return None


def when(value: Any) -> dt.datetime | None:
    """A timestamp member as a UTC datetime, whichever way the protocol carried it (datetime, epoch, ISO)."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(float(value), dt.UTC)
    if isinstance(value, str):
        try:
            return when(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def request(service: str, operation: str, **params: Any) -> AwsRequest:
    return AwsRequest(service=service, operation=operation, params=params)


def make_rule(
    service: str, rid: str, ops: str | tuple[str, ...], summary: str, source: str, check: Any, code: str, example: Any
) -> Rule:
    """A rule of one service, its id `<service>.<rid>`; `ops` one operation's name or several."""
    return Rule(
        f"{service}.{rid}", service, (ops,) if isinstance(ops, str) else ops, summary, source, check, code, example
    )
