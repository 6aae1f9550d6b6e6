"""The VM security group (its rules diffed against the spec) and the load balancer's group."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.aws import naming
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_spec
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError

HTTPS_PORT = 443
HTTP_PORT = 80

Source = tuple[int, str]  # (port, CIDR or security group id)


@dataclass
class IngressDiff:
    """What to send to AuthorizeSecurityGroupIngress and RevokeSecurityGroupIngress (IpPermissions)."""

    authorize: list[dict[str, Any]] = field(default_factory=list)
    revoke: list[dict[str, Any]] = field(default_factory=list)


def diff_ingress(desired: set[Source], observed: Sequence[Mapping[str, Any]]) -> IngressDiff:
    """The rule changes that turn the group's observed IpPermissions into exactly `desired`.

    Only single-port TCP rules from a CIDR or a group can be desired; everything else (other ports or
    protocols, other CIDRs or groups, IPv6, prefix lists) was not asked for and is revoked."""
    current: set[Source] = set()
    out = IngressDiff()
    for perm in observed:
        port = perm.get("FromPort")
        single_tcp = perm.get("IpProtocol") == "tcp" and isinstance(port, int) and port == perm.get("ToPort")
        keep_ranges = [r for r in perm.get("IpRanges", []) if single_tcp and (port, r["CidrIp"]) in desired]
        keep_pairs = [p for p in perm.get("UserIdGroupPairs", []) if single_tcp and (port, p["GroupId"]) in desired]
        if isinstance(port, int):  # only single-port TCP rules are kept, and those have a port
            current.update((port, str(r["CidrIp"])) for r in keep_ranges)
            current.update((port, str(p["GroupId"])) for p in keep_pairs)
        extra: dict[str, list[Any]] = {
            "IpRanges": [r for r in perm.get("IpRanges", []) if r not in keep_ranges],
            "UserIdGroupPairs": [revoke_pair(p) for p in perm.get("UserIdGroupPairs", []) if p not in keep_pairs],
            "Ipv6Ranges": perm.get("Ipv6Ranges", []),
            "PrefixListIds": perm.get("PrefixListIds", []),
        }
        if any(extra.values()):
            rule: dict[str, Any] = {k: perm[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in perm}
            out.revoke.append({**rule, **{k: v for k, v in extra.items() if v}})
    out.authorize = [_tcp_rule(port, source) for port, source in sorted(desired - current)]
    return out


def perm_rules(perms: Sequence[Mapping[str, Any]]) -> list[str]:
    """Security group permissions as sorted one-source rules (`tcp/22 0.0.0.0/0`, `all sg-1`): a set
    compared as a JSON list, whatever way the cloud grouped them."""
    out: set[str] = set()
    for p in perms:
        proto, lo, hi = p.get("IpProtocol"), p.get("FromPort"), p.get("ToPort")
        what = "all" if proto == "-1" else f"{proto}/{lo}" if lo == hi else f"{proto}/{lo}-{hi}"
        out.update(f"{what} {r['CidrIp']}" for r in p.get("IpRanges", []))
        out.update(f"{what} {r['CidrIpv6']}" for r in p.get("Ipv6Ranges", []))
        out.update(f"{what} {g['GroupId']}" for g in p.get("UserIdGroupPairs", []))
        out.update(f"{what} {x['PrefixListId']}" for x in p.get("PrefixListIds", []))
    return sorted(out)


def ensure_security_group(aws: AwsClients, ctx: Context) -> str:
    """The VM group: the configured TCP ports from inside the VPC only, and with a load balancer its
    target and health-check ports from the LB's group only. Never 22, never 0.0.0.0/0."""
    ec2, infra = aws.ec2, ctx.infra
    sg = find_or_create_group(aws, ctx, "vm-sg", "vm", "VPC-internal ingress only")
    infra.VMSecurityGroupID = sg["GroupId"]
    ctx.save()

    desired = desired_vm_ingress(ctx)
    diff = diff_ingress(desired, sg.get("IpPermissions", []))
    if diff.authorize:
        with contextlib.suppress(ConflictError):  # InvalidPermission.Duplicate: added before a crash
            aws_call(ec2.authorize_security_group_ingress, GroupId=sg["GroupId"], IpPermissions=diff.authorize)
    # Security groups are mutable in place: drop whatever the spec does not ask for.
    if diff.revoke:
        aws_call(ec2.revoke_security_group_ingress, GroupId=sg["GroupId"], IpPermissions=diff.revoke)
    ctx.log(f"vm security group {sg['GroupId']}: " + ", ".join(f"tcp/{p} from {s}" for p, s in sorted(desired)))
    return str(sg["GroupId"])


def find_or_create_group(aws: AwsClients, ctx: Context, role: str, suffix: str, purpose: str) -> dict[str, Any]:
    """The job's security group with `role`, found by tag or created in the VPC; returns it as described."""
    found = find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger, role))
    if found:
        return found[0]
    name = naming.account_unique(ctx.spec, suffix)
    gid = aws_call(
        aws.ec2.create_security_group,
        GroupName=name,
        Description=f"vmplane {suffix} of {ctx.spec.org}/{ctx.spec.name}: {purpose}",
        VpcId=ctx.infra.NetworkID,
        TagSpecifications=tag_spec("security-group", ctx.tagger.tags(role, name)),
    )["GroupId"]
    return {"GroupId": gid, "IpPermissions": []}


def revoke_pair(pair: dict[str, Any]) -> dict[str, Any]:
    """A group reference as revoke wants it. AWS matches on GroupId; the sandbox (moto) matches the whole
    pair as it was authorized, description included, so send it back as described."""
    return {k: pair[k] for k in ("GroupId", "UserId", "Description") if k in pair}


def desired_vm_ingress(ctx: Context) -> set[Source]:
    infra, lb = ctx.infra, ctx.spec.load_balancer
    lb_sg = aws_ids(infra).LoadBalancerSecurityGroupID if lb is not None else None
    lb_ports = {lb.target_port, lb.health_check.port} if lb is not None and lb_sg else set()
    out: set[Source] = {(p, str(aws_ids(infra).VpcCidr)) for p in ctx.spec.network.ingress_ports if p not in lb_ports}
    out.update((p, str(lb_sg)) for p in lb_ports)
    return out


def _tcp_rule(port: int, source: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": port, "ToPort": port}
    if source.startswith("sg-"):
        rule["UserIdGroupPairs"] = [{"GroupId": source, "Description": "from the load balancer only"}]
    else:
        rule["IpRanges"] = [{"CidrIp": source, "Description": "inside the VPC"}]
    return rule


def ensure_lb_security_group(aws: AwsClients, ctx: Context) -> None:
    """The LB's group: HTTP and HTTPS from anywhere. This step only adds what is missing; a rule added out of
    band is drift, revoked by the repair (clouds/aws/repair.py)."""
    ec2, infra = aws.ec2, ctx.infra
    group = find_or_create_group(aws, ctx, "lb-sg", "lb", "HTTPS and HTTP from anywhere")
    gid, perms = group["GroupId"], group.get("IpPermissions", [])
    aws_ids(infra).LoadBalancerSecurityGroupID = gid
    ctx.save()
    have = {
        p.get("FromPort")
        for p in perms
        if p.get("IpProtocol") == "tcp" and any(r.get("CidrIp") == "0.0.0.0/0" for r in p.get("IpRanges", []))
    }
    missing = [p for p in (HTTP_PORT, HTTPS_PORT) if p not in have]
    if missing:
        with contextlib.suppress(ConflictError):
            aws_call(
                ec2.authorize_security_group_ingress,
                GroupId=gid,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": p,
                        "ToPort": p,
                        "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "public listener"}],
                    }
                    for p in missing
                ],
            )


# ---- teardown -------------------------------------------------------------------------------------


def delete_security_group(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    groups = [
        g
        for g in find_tagged(ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger))
        if g["GroupName"] != "default"  # the VPC's own group goes with the VPC
    ]
    for sg in groups:
        # Interfaces of terminated instances release the group a little later: DependencyViolation till then.
        gid = sg["GroupId"]
        deletes.delete(partial(aws_call, ec2.delete_security_group, GroupId=gid), what=f"delete {gid}")
    ctx.infra.VMSecurityGroupID = None
    ctx.save()
    ctx.log(f"deleted {len(groups)} security groups")
