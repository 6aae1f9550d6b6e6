"""Target group membership: register a VM, wait until the LB finds it healthy, drain it before it goes."""

from __future__ import annotations

import contextlib

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.waits import poll

DRAIN_SECONDS = 30  # the target group's deregistration delay: in-flight requests finish before a VM goes


def register_target(aws: AwsClients, ctx: Context, instance_id: str) -> None:
    if aws_ids(ctx.infra).TargetGroupArn:
        aws_call(
            aws.elbv2.register_targets, TargetGroupArn=aws_ids(ctx.infra).TargetGroupArn, Targets=[{"Id": instance_id}]
        )


def wait_healthy(aws: AwsClients, ctx: Context, instance_id: str, timeout: float) -> str:
    """Wait until the LB reports the target healthy; returns its final state."""
    arn = aws_ids(ctx.infra).TargetGroupArn
    if not arn:
        return "no-load-balancer"

    def healthy() -> str | None:
        desc = aws_call(aws.elbv2.describe_target_health, TargetGroupArn=arn, Targets=[{"Id": instance_id}])
        state = desc["TargetHealthDescriptions"][0]["TargetHealth"]["State"]
        return state if state == "healthy" else None

    return poll(healthy, what=f"target {instance_id} to be healthy", timeout=timeout, first=0.1)


def drain_target(aws: AwsClients, ctx: Context, instance_id: str) -> None:
    """Deregister a VM and wait out the drain, so its in-flight requests finish first."""
    arn = aws_ids(ctx.infra).TargetGroupArn
    if not arn:
        return
    with contextlib.suppress(NotFoundError, InvalidRequestError):  # already gone
        aws_call(aws.elbv2.deregister_targets, TargetGroupArn=arn, Targets=[{"Id": instance_id}])

    def drained() -> bool | None:
        desc = aws_call(aws.elbv2.describe_target_health, TargetGroupArn=arn, Targets=[{"Id": instance_id}])
        state = desc["TargetHealthDescriptions"][0]["TargetHealth"]["State"]
        return True if state != "draining" else None

    poll(drained, what=f"target {instance_id} to drain", timeout=DRAIN_SECONDS + 120, first=0.1, cap=5)
