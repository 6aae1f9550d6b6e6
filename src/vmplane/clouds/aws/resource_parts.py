"""The AWS resource table's reads and deletes (`resources.TABLE` declares the kinds).

Each `observe_*` is read-only: everything of its kind carrying the job's tags (IAM by the job's role
names, DNS records from the record: Route53 records take no tags), as neutral `Observed` resources whose
`fields` hold what drift compares. Each `delete_*` removes one resource by id; already gone is done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vmplane.clouds.aws import certs, dns, eventbridge, iam, lb, naming, schedules
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.security_groups import perm_rules
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, job_filters, matches_tag_filters, owned_by
from vmplane.clouds.base import Context
from vmplane.clouds.drift import Observed
from vmplane.clouds.errors import NotFoundError

Observer = Callable[[AwsClients, Context], list[Observed]]
Deleter = Callable[[AwsClients, Context, str], None]
Item = dict[str, Any]

# EC2 states a resource is still there in (teardown waits out the others).
INSTANCE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
NAT_STATES = ["pending", "available", "deleting"]
POWER = {"pending": "running", "running": "running", "stopping": "stopped", "stopped": "stopped"}


def tag_dict(tags: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or []}


def routes(table: Item) -> list[str]:
    """A route table's routes other than the VPC's local one, as `<destination> -> <target>`."""
    out = []
    for r in table.get("Routes", []):
        target = r.get("NatGatewayId") or r.get("GatewayId") or r.get("NetworkInterfaceId") or r.get("InstanceId")
        if target == "local":
            continue
        dest = r.get("DestinationCidrBlock") or r.get("DestinationIpv6CidrBlock") or r.get("DestinationPrefixListId")
        state = "" if r.get("State", "active") == "active" else f" ({r['State']})"
        out.append(f"{dest} -> {target}{state}")
    return sorted(out)


def _no_fields(_item: Item) -> dict[str, Any]:
    return {}


def ec2_observer(
    kind: str,
    method: str,
    key: str,
    id_key: str,
    fields: Callable[[Item], dict[str, Any]] = _no_fields,
    extra: list[dict[str, Any]] | None = None,
) -> Observer:
    """One EC2 describe with the job's tag filter (re-checked client-side: some sandbox endpoints ignore it)."""

    def observe(aws: AwsClients, ctx: Context) -> list[Observed]:
        base = job_filters(ctx.tagger)
        items = aws_call(getattr(aws.ec2, method), Filters=[*base, *(extra or [])])[key]
        if key == "Reservations":
            items = [i for r in items for i in r["Instances"]]
        out = []
        for i in items:
            if matches_tag_filters(i, base):
                tags = tag_dict(i.get("Tags"))
                out.append(Observed(kind, str(i[id_key]), tags.get("Name"), tags, fields(i)))
        return out

    return observe


def instance_fields(i: Item) -> dict[str, Any]:
    state = i["State"]["Name"]
    return {"state": POWER.get(state, "terminated")}


def group_fields(g: Item) -> dict[str, Any]:
    return {"ingress": perm_rules(g.get("IpPermissions", [])), "egress": perm_rules(g.get("IpPermissionsEgress", []))}


def nat_fields(n: Item) -> dict[str, Any]:
    return {"state": n.get("State")}


def observe_scaling_groups(aws: AwsClients, ctx: Context) -> list[Observed]:
    """Tag filters on DescribeAutoScalingGroups are not supported everywhere: every page, checked here."""
    out = []
    with aws_errors():
        for page in aws.autoscaling.get_paginator("describe_auto_scaling_groups").paginate():
            for g in page["AutoScalingGroups"]:
                if not owned_by(g.get("Tags", []), ctx.tagger):
                    continue
                name = g["AutoScalingGroupName"]
                fields = {
                    "launchTemplate": (g.get("LaunchTemplate") or {}).get("LaunchTemplateId"),
                    "targetGroups": sorted(g.get("TargetGroupARNs", [])),
                    "instances": sorted(i["InstanceId"] for i in g.get("Instances", [])),
                }
                tags = {t["Key"]: t.get("Value", "") for t in g.get("Tags", [])}
                out.append(Observed("auto-scaling-group", name, name, tags, fields))
    return out


def _role_names(ctx: Context) -> list[str]:
    ids = aws_ids(ctx.infra)
    names = [ids.RoleName or iam.role_name(ctx), ids.SchedulerRoleName or naming.scheduler_role_name(ctx.spec)]
    return list(dict.fromkeys(names))


def _iam_observed(kind: str, name: str, fetch: Callable[[], TagList], ctx: Context) -> list[Observed]:
    try:
        tags = fetch()
    except NotFoundError:
        return []
    return [Observed(kind, name, name, tag_dict(tags))] if owned_by(tags, ctx.tagger) else []


def observe_roles(aws: AwsClients, ctx: Context) -> list[Observed]:
    """The VM role and the scheduler's role, by the names the job gives them (IAM has no tag search)."""
    return [o for name in _role_names(ctx) for o in _iam_observed("iam-role", name, iam.role_tags(aws, name), ctx)]


def observe_profiles(aws: AwsClients, ctx: Context) -> list[Observed]:
    name = _role_names(ctx)[0]
    return _iam_observed("iam-instance-profile", name, iam.profile_tags(aws, name), ctx)


def _elb(aws: AwsClients, ctx: Context, kind: str) -> list[Observed]:
    out = []
    for arn, tags in lb.job_elb_resources(aws, ctx.tagger):
        if (":loadbalancer/" in arn) == (kind == "load-balancer"):
            t = tag_dict(tags)
            out.append(Observed(kind, arn, t.get("Name"), t))
    return out


def observe_load_balancers(aws: AwsClients, ctx: Context) -> list[Observed]:
    return _elb(aws, ctx, "load-balancer")


def observe_target_groups(aws: AwsClients, ctx: Context) -> list[Observed]:
    """With the registered targets (any state but draining: a target on its way out is not a member)."""
    out = []
    for o in _elb(aws, ctx, "target-group"):
        health = aws_call(aws.elbv2.describe_target_health, TargetGroupArn=o.id)["TargetHealthDescriptions"]
        members = sorted(
            h["Target"]["Id"] for h in health if h.get("TargetHealth", {}).get("State") not in ("draining",)
        )
        out.append(Observed(o.kind, o.id, o.name, o.tags, {"targets": members}))
    return out


def observe_listeners(aws: AwsClients, ctx: Context) -> list[Observed]:
    """The listeners of the job's load balancers that carry its tags, named `<lb>/<protocol>` as the plan."""
    out = []
    for alb in _elb(aws, ctx, "load-balancer"):
        listeners = aws_call(aws.elbv2.describe_listeners, LoadBalancerArn=alb.id)["Listeners"]
        if not listeners:
            continue
        described = aws_call(aws.elbv2.describe_tags, ResourceArns=[x["ListenerArn"] for x in listeners])
        tags_by_arn = {d["ResourceArn"]: tag_dict(d.get("Tags")) for d in described["TagDescriptions"]}
        for x in listeners:
            tags = tags_by_arn.get(x["ListenerArn"], {})
            if tags.get(ctx.tagger.job_key) != ctx.tagger.job_id:
                continue
            name = f"{alb.name}/{str(x['Protocol']).lower()}"
            fields = {"certificates": sorted(c["CertificateArn"] for c in x.get("Certificates", []))}
            out.append(Observed("listener", x["ListenerArn"], name, tags, fields))
    return out


def observe_certificates(aws: AwsClients, ctx: Context) -> list[Observed]:
    out = []
    for arn, tags in certs.job_certificates(aws, ctx.tagger):
        t = tag_dict(tags)
        out.append(Observed("certificate", arn, t.get("Name"), t))
    return out


def observe_dns_records(aws: AwsClients, ctx: Context) -> list[Observed]:
    """Route53 records take no tags: the ones the record lists, where they still exist."""
    return [
        Observed("dns-record", f"{r.Name} {r.Type}", r.Name.rstrip("."))
        for r in aws_ids(ctx.infra).DNSRecords
        if dns.find_record(aws, r) is not None
    ]


def observe_scheduled_actions(aws: AwsClients, ctx: Context) -> list[Observed]:
    """Scheduled actions take no tags: those named for the job's pools on the job's groups."""
    return [Observed("scheduled-action", f"{group}/{name}", name) for group, name in schedules.our_actions(aws, ctx)]


def observe_schedule_groups(aws: AwsClients, ctx: Context) -> list[Observed]:
    found = eventbridge.owned_group(aws, ctx)
    if found is None:
        return []
    name = aws_ids(ctx.infra).ScheduleGroupName or naming.schedule_group_name(ctx.spec)
    return [Observed("schedule-group", name, name, tag_dict(found[1]))]


def observe_schedules(aws: AwsClients, ctx: Context) -> list[Observed]:
    """Schedules take no tags: those in the job's (tagged) schedule group."""
    found = eventbridge.group_contents(aws, ctx)
    if found is None:
        return []
    group, names = found
    return [Observed("schedule", f"{group}/{n}", n) for n in names]


# ---- deletes (drift's extras) ---------------------------------------------------------------------


def ec2_deleter(method: str, id_param: str, *, as_list: bool = False) -> Deleter:
    def delete(aws: AwsClients, _ctx: Context, rid: str) -> None:
        with contextlib.suppress(NotFoundError):
            aws_call(getattr(aws.ec2, method), **{id_param: [rid] if as_list else rid})

    return delete


def delete_scaling_group(aws: AwsClients, _ctx: Context, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        aws_call(aws.autoscaling.delete_auto_scaling_group, AutoScalingGroupName=name, ForceDelete=True)


def elb_deleter(method: str, id_param: str) -> Deleter:
    def delete(aws: AwsClients, _ctx: Context, arn: str) -> None:
        with contextlib.suppress(NotFoundError):
            aws_call(getattr(aws.elbv2, method), **{id_param: arn})

    return delete


def delete_certificate(aws: AwsClients, _ctx: Context, arn: str) -> None:
    with contextlib.suppress(NotFoundError):
        aws_call(aws.acm.delete_certificate, CertificateArn=arn)
