"""stepValidate's name-conflict check: every account-unique name this job would create, looked up
before anything is created, so an environment that already exists under the same org/name (another
vmplane job, the generated Terraform stack, a hand-made resource) fails the job at once instead of
after the network is built. Security groups are unique per VPC only, so they cannot clash yet.

A resource tagged with this job is not a conflict: it is a resume or an update of the same job."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from vmplane.clouds.aws import eventbridge, iam, naming, scheduler_role
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import DnsRecord, aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, owned_by, tag_owner
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, NotFoundError
from vmplane.clouds.parallel import side_by_side
from vmplane.envspec.models import AsgPool

Tags = TagList
# Route53 refuses an A record beside a CNAME of the same name, and an UPSERT would overwrite an A.
_CLASHING_RECORD_TYPES = ("A", "CNAME")


def check_names(aws: AwsClients, ctx: Context) -> None:
    """IAM role and instance profile, launch templates and ASGs (per region), by the names the steps use.
    The lookups are independent: side by side, every clash reported at once."""
    spec = ctx.spec
    role = naming.role_name(spec)
    checks: list[Callable[[], list[str]]] = [
        lambda: _clash(ctx, "IAM role", role, _tags_or_none(iam.role_tags(aws, role))),
        lambda: _clash(ctx, "IAM instance profile", role, _tags_or_none(iam.profile_tags(aws, role))),
    ]
    for pool_name, pool in spec.pools.items():
        checks.append(partial(_launch_template_clash, aws, ctx, naming.launch_template_name(spec, pool_name)))
        if isinstance(pool, AsgPool):
            checks.append(partial(_asg_clash, aws, ctx, naming.asg_name(spec, pool_name)))
    if scheduler_role.needed(spec):
        sched_role, group = naming.scheduler_role_name(spec), naming.schedule_group_name(spec)
        checks.append(lambda: _clash(ctx, "IAM role", sched_role, _tags_or_none(iam.role_tags(aws, sched_role))))
        checks.append(
            lambda: _clash(
                ctx, "schedule group", group, _tags_or_none(lambda: eventbridge.group_arn_tags(aws, group)[1])
            )
        )
    found = [line for lines in side_by_side(*checks) for line in lines]
    _raise(ctx, found, "`org` or `name`")


def _launch_template_clash(aws: AwsClients, ctx: Context, name: str) -> list[str]:
    lts = aws_call(aws.ec2.describe_launch_templates, Filters=[{"Name": "launch-template-name", "Values": [name]}])[
        "LaunchTemplates"
    ]
    return _clash(ctx, "launch template", name, lts[0].get("Tags", []) if lts else None)


def _asg_clash(aws: AwsClients, ctx: Context, name: str) -> list[str]:
    asgs = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return _clash(ctx, "auto scaling group", name, asgs[0].get("Tags", []) if asgs else None)


def check_lb_names(aws: AwsClients, ctx: Context, zone: str | None) -> None:
    """The ALB and target group names, and the domain's record in the hosted zone."""
    spec, lb = ctx.spec, ctx.spec.load_balancer
    if lb is None:
        return
    lb_name, tg_name = naming.lb_base_name(spec), naming.target_group_name(spec)
    elb = aws.elbv2
    lb_tags, tg_tags, sets = side_by_side(
        lambda: _elb_tags(aws, elb.describe_load_balancers, "LoadBalancers", "LoadBalancerArn", lb_name),
        lambda: _elb_tags(aws, elb.describe_target_groups, "TargetGroups", "TargetGroupArn", tg_name),
        lambda: _record_sets(aws, zone, lb.domain),
    )
    found = _clash(ctx, "load balancer", lb_name, lb_tags) + _clash(ctx, "target group", tg_name, tg_tags)
    _raise(ctx, found, "`org` or `name`")
    if zone is None:
        return
    ours = aws_ids(ctx.infra).DNSRecords
    for rr in sets:
        if rr["Name"].rstrip(".").lower() != lb.domain.lower() or rr["Type"] not in _CLASHING_RECORD_TYPES:
            continue
        if DnsRecord(ZoneID=zone, Name=lb.domain, Type=rr["Type"]) in ours:
            continue
        raise ConflictError(
            f"loadBalancer.domain: hosted zone {zone} already has a {rr['Type']} record for {lb.domain} that "
            f"this job did not write (Route53 records carry no owner tag; another environment or the "
            "generated Terraform stack may own it); delete that record or choose another loadBalancer.domain",
            code="RecordAlreadyExists",
        )


def _record_sets(aws: AwsClients, zone: str | None, domain: str) -> Sequence[Mapping[str, Any]]:
    if zone is None:
        return []
    out: Sequence[Mapping[str, Any]] = aws_call(
        aws.route53.list_resource_record_sets, HostedZoneId=zone, StartRecordName=domain, MaxItems="10"
    )["ResourceRecordSets"]
    return out


def _tags_or_none(fetch: Callable[[], Tags]) -> Tags | None:
    """The entity's tags, or None if it does not exist."""
    try:
        return fetch()
    except NotFoundError:
        return None


def _elb_tags(
    aws: AwsClients, describe: Callable[..., Mapping[str, Any]], key: str, arn_key: str, name: str
) -> Tags | None:
    """The tags of the ELB resource named `name` (names are unique per region), or None if absent."""
    try:
        arn = aws_call(describe, Names=[name])[key][0][arn_key]
    except NotFoundError:
        return None
    desc = aws_call(aws.elbv2.describe_tags, ResourceArns=[arn])["TagDescriptions"]
    return [t for d in desc for t in d.get("Tags", [])]


def _clash(ctx: Context, kind: str, name: str, tags: Tags | None) -> list[str]:
    """One line naming the resource and its owner, if it exists and is not this job's."""
    if tags is None or owned_by(tags, ctx.tagger):
        return []
    owner = tag_owner(tags, ctx.tagger)
    return [f"{kind} {name} already exists and belongs to {f'job {owner}' if owner else 'something outside vmplane'}"]


def _raise(ctx: Context, found: list[str], fields: str) -> None:
    if found:
        raise ConflictError(
            f"{'; '.join(found)}. These names come from {fields} ({ctx.spec.org}/{ctx.spec.name}): destroy the "
            f"environment that owns them (`vmplane destroy`, or `terraform destroy` for a generated stack) "
            f"or change {fields}",
            code="EntityAlreadyExists",
        )
