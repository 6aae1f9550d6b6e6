"""stepValidate's name-conflict check: every account-unique name this job would create, looked up
before anything is created, so an environment that already exists under the same org/name (another
vmplane job, the generated Terraform stack, a hand-made resource) fails the job at once instead of
after the network is built. Security groups are unique per VPC only, so they cannot clash yet.

A resource tagged with this job is not a conflict: it is a resume or an update of the same job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmplane.clouds.aws import eventbridge, iam, naming, scheduler_role
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import DnsRecord, aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import owned_by, tag_owner
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, NotFoundError
from vmplane.envspec.models import AsgPool

Tags = list[dict[str, str]]
# Route53 refuses an A record beside a CNAME of the same name, and an UPSERT would overwrite an A.
_CLASHING_RECORD_TYPES = ("A", "CNAME")


def check_names(aws: AwsClients, ctx: Context) -> None:
    """IAM role and instance profile, launch templates and ASGs (per region), by the names the steps use."""
    spec = ctx.spec
    role = naming.role_name(spec)
    found: list[str] = []
    found += _clash(ctx, "IAM role", role, _tags_or_none(iam.role_tags(aws, role)))
    found += _clash(ctx, "IAM instance profile", role, _tags_or_none(iam.profile_tags(aws, role)))
    for pool_name, pool in spec.pools.items():
        name = naming.launch_template_name(spec, pool_name)
        lts = aws_call(aws.ec2.describe_launch_templates, Filters=[{"Name": "launch-template-name", "Values": [name]}])[
            "LaunchTemplates"
        ]
        found += _clash(ctx, "launch template", name, lts[0].get("Tags", []) if lts else None)
        if isinstance(pool, AsgPool):
            name = naming.asg_name(spec, pool_name)
            groups = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])
            asgs = groups["AutoScalingGroups"]
            found += _clash(ctx, "auto scaling group", name, asgs[0].get("Tags", []) if asgs else None)
    if scheduler_role.needed(spec):
        name = naming.scheduler_role_name(spec)
        found += _clash(ctx, "IAM role", name, _tags_or_none(iam.role_tags(aws, name)))
        name = naming.schedule_group_name(spec)
        group = _tags_or_none(lambda: eventbridge.group_arn_tags(aws, naming.schedule_group_name(spec))[1])
        found += _clash(ctx, "schedule group", naming.schedule_group_name(spec), group)
    _raise(ctx, found, "`org` or `name`")


def check_lb_names(aws: AwsClients, ctx: Context, zone: str | None) -> None:
    """The ALB and target group names, and the domain's record in the hosted zone."""
    spec, lb = ctx.spec, ctx.spec.load_balancer
    if lb is None:
        return
    found: list[str] = []
    name = naming.lb_base_name(spec)
    tags = _elb_tags(aws, aws.elbv2.describe_load_balancers, "LoadBalancers", "LoadBalancerArn", name)
    found += _clash(ctx, "load balancer", name, tags)
    name = naming.target_group_name(spec)
    tags = _elb_tags(aws, aws.elbv2.describe_target_groups, "TargetGroups", "TargetGroupArn", name)
    found += _clash(ctx, "target group", name, tags)
    _raise(ctx, found, "`org` or `name`")
    if zone is None:
        return
    sets = aws_call(aws.route53.list_resource_record_sets, HostedZoneId=zone, StartRecordName=lb.domain, MaxItems="10")[
        "ResourceRecordSets"
    ]
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


def _tags_or_none(fetch: Callable[[], Tags]) -> Tags | None:
    """The entity's tags, or None if it does not exist."""
    try:
        return fetch()
    except NotFoundError:
        return None


def _elb_tags(
    aws: AwsClients, describe: Callable[..., dict[str, Any]], key: str, arn_key: str, name: str
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
