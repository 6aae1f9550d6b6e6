"""The VM role and instance profile: the exec-channel policy (SSM) and nothing broader."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from vmplane.clouds import deletes
from vmplane.clouds.aws import naming
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import owned_by, tag_list, tag_owner
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, NotFoundError

EXEC_POLICY_ARN = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
ASSUME_ROLE_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    },
    sort_keys=True,
)


def role_name(ctx: Context) -> str:
    return naming.role_name(ctx.spec)


def ensure_identity(aws: AwsClients, ctx: Context) -> None:
    iam, infra, t = aws.iam, ctx.infra, ctx.tagger
    name = role_name(ctx)
    aws_ids(infra).RoleName = aws_ids(infra).InstanceProfileName = name
    ctx.save()
    try:
        aws_call(
            iam.create_role,
            RoleName=name,
            AssumeRolePolicyDocument=ASSUME_ROLE_POLICY,
            Description=f"vmplane VM role for {ctx.spec.org}/{ctx.spec.name}: exec channel only",
            Tags=tag_list(t.tags("iam-role", name)),
        )
    except ConflictError:
        _check_ours(aws, ctx, name)
    attached = aws_call(iam.list_attached_role_policies, RoleName=name)["AttachedPolicies"]
    if not any(p["PolicyArn"] == EXEC_POLICY_ARN for p in attached):
        aws_call(iam.attach_role_policy, RoleName=name, PolicyArn=EXEC_POLICY_ARN)

    try:
        profile = aws_call(
            iam.create_instance_profile, InstanceProfileName=name, Tags=tag_list(t.tags("instance-profile", name))
        )["InstanceProfile"]
    except ConflictError:
        _owned(ctx, profile_tags(aws, name), "instance profile", name)
        profile = aws_call(iam.get_instance_profile, InstanceProfileName=name)["InstanceProfile"]
    if not any(r["RoleName"] == name for r in profile.get("Roles", [])):
        aws_call(iam.add_role_to_instance_profile, InstanceProfileName=name, RoleName=name)
    aws_ids(infra).InstanceProfileArn = profile["Arn"]
    ctx.save()
    ctx.log(f"role + instance profile {name} ({EXEC_POLICY_ARN.rsplit('/', 1)[1]})")


def _owned(ctx: Context, fetch_tags: Callable[[], list[dict[str, str]]], kind: str, name: str) -> bool:
    """True if the entity exists and carries this job's tag; raise if it exists but is someone else's."""
    try:
        tags = fetch_tags()
    except NotFoundError:
        return False
    if not owned_by(tags, ctx.tagger):
        owner = tag_owner(tags, ctx.tagger)
        raise ConflictError(
            f"IAM {kind} {name} already exists and belongs to "
            f"{'job ' + owner if owner else 'something outside vmplane'}; destroy that environment first "
            "or choose another name",
            code="EntityAlreadyExists",
        )
    return True


# GetInstanceProfile carries the tags (and, unlike ListInstanceProfileTags, the sandbox implements it).
def role_tags(aws: AwsClients, name: str) -> Callable[[], list[dict[str, str]]]:
    return lambda: list(aws_call(aws.iam.list_role_tags, RoleName=name)["Tags"])


def profile_tags(aws: AwsClients, name: str) -> Callable[[], list[dict[str, str]]]:
    return lambda: list(
        aws_call(aws.iam.get_instance_profile, InstanceProfileName=name)["InstanceProfile"].get("Tags", [])
    )


def _check_ours(aws: AwsClients, ctx: Context, name: str) -> None:
    _owned(ctx, role_tags(aws, name), "role", name)


def delete_identity(aws: AwsClients, ctx: Context) -> None:
    iam = aws.iam
    name = aws_ids(ctx.infra).RoleName or role_name(ctx)

    def gone(call: Callable[..., object], what: str, **kwargs: str) -> None:
        # A crash between two of these calls leaves the rest to do: each part already gone is done.
        deletes.delete(partial(aws_call, call, **kwargs), what=what)

    if _owned(ctx, profile_tags(aws, name), "instance profile", name):
        profile = aws_call(iam.get_instance_profile, InstanceProfileName=name)["InstanceProfile"]
        for r in profile.get("Roles", []):
            role = r["RoleName"]
            gone(iam.remove_role_from_instance_profile, f"detach {role}", InstanceProfileName=name, RoleName=role)
        gone(iam.delete_instance_profile, f"delete instance profile {name}", InstanceProfileName=name)
    if _owned(ctx, role_tags(aws, name), "role", name):
        for p in aws_call(iam.list_attached_role_policies, RoleName=name)["AttachedPolicies"]:
            arn = p["PolicyArn"]
            gone(iam.detach_role_policy, f"detach {arn}", RoleName=name, PolicyArn=arn)
        for pol in aws_call(iam.list_role_policies, RoleName=name)["PolicyNames"]:
            gone(iam.delete_role_policy, f"delete policy {pol}", RoleName=name, PolicyName=pol)
        # DeleteConflict while the profile still holds the role (eventual consistency): retried.
        gone(iam.delete_role, f"delete role {name}", RoleName=name)
    aws_ids(ctx.infra).RoleName = aws_ids(ctx.infra).InstanceProfileName = aws_ids(ctx.infra).InstanceProfileArn = None
    ctx.save()
