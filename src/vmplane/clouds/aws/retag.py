"""A change of the spec's `tags` applied in place: every resource of the job gets the new user tags, and
user tags that were removed from the file are removed from the resources. vmplane's own keys (the
prefix ones), `Name` and AWS's `aws:` keys are never touched here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vmplane.clouds.aws import certs, eventbridge, iam, inventory, lb
from vmplane.clouds.aws.asg import job_scaling_groups
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import tag_list
from vmplane.clouds.base import Context
from vmplane.clouds.errors import NotFoundError


def _stale(tags: Sequence[Mapping[str, Any]], ctx: Context) -> list[str]:
    keep = set(ctx.spec.tags) | {"Name"}
    return sorted(
        t["Key"] for t in tags if t["Key"] not in keep and not t["Key"].startswith((ctx.spec.tag_prefix, "aws:"))
    )


def retag(aws: AwsClients, ctx: Context) -> int:
    """Returns how many resources were looked at."""
    wanted = tag_list(ctx.spec.tags)
    ec2_items = [(rid, tags) for _, rid, tags in inventory.job_ec2_resources(aws, ctx)]
    ids = [rid for rid, _ in ec2_items]
    for i in range(0, len(ids), 500):
        if wanted:
            aws_call(aws.ec2.create_tags, Resources=ids[i : i + 500], Tags=wanted)
    for rid, tags in ec2_items:
        if stale := _stale(tags, ctx):
            aws_call(aws.ec2.delete_tags, Resources=[rid], Tags=[{"Key": k} for k in stale])
    count = len(ids)
    for group in job_scaling_groups(aws, ctx.tagger):
        desc = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[group])
        current = desc["AutoScalingGroups"][0].get("Tags", [])
        ref: dict[str, Any] = {"ResourceId": group, "ResourceType": "auto-scaling-group"}
        if wanted:
            aws_call(
                aws.autoscaling.create_or_update_tags,
                Tags=[{**ref, **t, "PropagateAtLaunch": True} for t in wanted],
            )
        if stale := _stale(current, ctx):
            aws_call(aws.autoscaling.delete_tags, Tags=[{**ref, "Key": k} for k in stale])
        count += 1
    count += 2 * _retag_role(aws, ctx, aws_ids(ctx.infra).RoleName or iam.role_name(ctx), wanted, profile=True)
    count += _retag_scheduler(aws, ctx, wanted)
    elb_items = lb.job_elb_resources(aws, ctx.tagger)
    elb_items += lb.job_listeners(aws, ctx.tagger, [a for a, _ in elb_items if ":loadbalancer/" in a])
    for arn, tags in elb_items:
        if wanted:
            aws_call(aws.elbv2.add_tags, ResourceArns=[arn], Tags=wanted)
        if stale := _stale(tags, ctx):
            aws_call(aws.elbv2.remove_tags, ResourceArns=[arn], TagKeys=stale)
        count += 1
    for arn, tags in certs.job_certificates(aws, ctx.tagger):
        if wanted:
            aws_call(aws.acm.add_tags_to_certificate, CertificateArn=arn, Tags=wanted)
        if stale := _stale(tags, ctx):
            aws_call(aws.acm.remove_tags_from_certificate, CertificateArn=arn, Tags=[{"Key": k} for k in stale])
        count += 1
    ctx.log(f"tags updated on {count} resources: {', '.join(sorted(ctx.spec.tags)) or 'no user tags'}")
    return count


def _retag_role(aws: AwsClients, ctx: Context, name: str, wanted: list[dict[str, str]], *, profile: bool) -> int:
    """Re-tag an IAM role (and its instance profile of the same name); 1 if it exists, 0 if it is gone."""
    try:
        tags = iam.role_tags(aws, name)()
    except NotFoundError:
        return 0
    if wanted:
        aws_call(aws.iam.tag_role, RoleName=name, Tags=wanted)
        if profile:
            aws_call(aws.iam.tag_instance_profile, InstanceProfileName=name, Tags=wanted)
    if stale := _stale(tags, ctx):
        aws_call(aws.iam.untag_role, RoleName=name, TagKeys=stale)
        if profile:
            aws_call(aws.iam.untag_instance_profile, InstanceProfileName=name, TagKeys=stale)
    return 1


def _retag_scheduler(aws: AwsClients, ctx: Context, wanted: list[dict[str, str]]) -> int:
    """The scheduler's role and schedule group, where the job has them (schedules take no tags)."""
    ids, count = aws_ids(ctx.infra), 0
    if ids.SchedulerRoleName:
        count += _retag_role(aws, ctx, ids.SchedulerRoleName, wanted, profile=False)
    if ids.ScheduleGroupName and (group := eventbridge.owned_group(aws, ctx)) is not None:
        arn, tags = group
        if wanted:
            aws_call(aws.scheduler.tag_resource, ResourceArn=arn, Tags=wanted)
        if stale := _stale(tags, ctx):
            aws_call(aws.scheduler.untag_resource, ResourceArn=arn, TagKeys=stale)
        count += 1
    return count
