"""What the EventBridge Scheduler role may do, as pure documents: start and stop this job's instances.

Trust: `scheduler.amazonaws.com`, and only on behalf of this account's schedules in the environment's
schedule group (`aws:SourceAccount` and `aws:SourceArn`, AWS's guard against the confused deputy).
Permission: `ec2:StartInstances` and `ec2:StopInstances` on instances that carry this job's tag
(`aws:ResourceTag/<prefix>jobId`), nothing else: no other action, no instance of another environment.
The role itself is made and removed in `iam.py`.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.naming import partition
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context, Tagger
from vmplane.envspec.models import EnvSpec, FixedPool

POLICY_NAME = "vmplane-start-stop-instances"
SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"
ACTIONS = ["ec2:StartInstances", "ec2:StopInstances"]


def needed(spec: EnvSpec) -> bool:
    """Only Fixed pools run through EventBridge Scheduler (an ASG's scheduled actions need no role)."""
    return any(isinstance(p, FixedPool) and p.schedule is not None for p in spec.pools.values())


def account_id(aws: AwsClients, ctx: Context) -> str:
    """The account, as stepValidate recorded it (asked again for a record that predates that)."""
    ids = aws_ids(ctx.infra)
    if ids.AccountID is None:
        ids.AccountID = str(aws_call(aws.sts.get_caller_identity)["Account"])
    return ids.AccountID


def trust_policy(account: str, region: str, group: str) -> dict[str, Any]:
    source = f"arn:{partition(region)}:scheduler:{region}:{account}:schedule/{group}/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": SCHEDULER_PRINCIPAL},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": account}, "ArnLike": {"aws:SourceArn": source}},
            }
        ],
    }


def permissions_policy(tagger: Tagger, account: str, region: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StartStopThisJobsInstances",
                "Effect": "Allow",
                "Action": list(ACTIONS),
                "Resource": f"arn:{partition(region)}:ec2:{region}:{account}:instance/*",
                "Condition": {"StringEquals": {f"aws:ResourceTag/{tagger.job_key}": tagger.job_id}},
            }
        ],
    }
