"""The VM role and instance profile: the exec-channel policy (SSM), read access to exactly the referenced
secrets (`secret_policy`), and nothing broader; and, when a Fixed pool has a schedule, the role
EventBridge Scheduler runs its schedules as (`scheduler_role`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.aws import naming, scheduler_role, secret_policy
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, owned_by, tag_list, tag_owner
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.envspec.secrets import secret_refs

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
            Description=f"vmplane VM role for {ctx.spec.org}/{ctx.spec.name}: exec channel and referenced secrets only",
            Tags=tag_list(t.tags("iam-role", name)),
        )
    except ConflictError:
        _check_ours(aws, ctx, name)
    attached = aws_call(iam.list_attached_role_policies, RoleName=name)["AttachedPolicies"]
    if not any(p["PolicyArn"] == EXEC_POLICY_ARN for p in attached):
        aws_call(iam.attach_role_policy, RoleName=name, PolicyArn=EXEC_POLICY_ARN)
    ensure_secret_grants(aws, ctx)

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
    if scheduler_role.needed(ctx.spec):
        # Here rather than with the schedules: IAM is eventually consistent, and the VMs' boot gives the
        # role time to reach EventBridge Scheduler before stepCreateVMs names it in a schedule.
        ensure_scheduler_role(aws, ctx)


def ensure_secret_grants(aws: AwsClients, ctx: Context) -> None:
    """The VM role's `vmplane-secrets` policy as the spec's references want it: put (PutRolePolicy replaces
    by name, so a re-run converges) when it differs, deleted when nothing is referenced any more (a
    policy already gone is done). Runs in stepCreateIAM, and before a runtime push of new references."""
    iam, name = aws.iam, aws_ids(ctx.infra).RoleName or role_name(ctx)
    refs = secret_policy.aws_refs(secret_refs(ctx.spec))
    region = ctx.spec.provider.region
    grants = AwsSecretAccess(aws, memo=True).grants(refs, scheduler_role.account_id(aws, ctx)) if refs else []
    doc = secret_policy.policy_document(grants, region)
    if doc is None:
        # Read first: most roles never had one, and a read is no change to the role (nor a kill point).
        if secret_policy.POLICY_NAME in aws_call(iam.list_role_policies, RoleName=name)["PolicyNames"]:
            delete = partial(aws_call, iam.delete_role_policy, RoleName=name, PolicyName=secret_policy.POLICY_NAME)
            if deletes.delete(delete, what=f"delete policy {secret_policy.POLICY_NAME}"):
                ctx.log(f"role {name}: no secret referenced, its {secret_policy.POLICY_NAME} policy removed")
        _record_secrets_policy(ctx, None)
        return
    too_big = secret_policy.size_problem(grants, region)
    if too_big:
        raise InvalidRequestError(too_big)
    current: Mapping[str, Any]
    try:
        current = aws_call(iam.get_role_policy, RoleName=name, PolicyName=secret_policy.POLICY_NAME)
    except NotFoundError:
        current = {}
    if current.get("PolicyDocument") != doc:
        aws_call(
            iam.put_role_policy,
            RoleName=name,
            PolicyName=secret_policy.POLICY_NAME,
            PolicyDocument=secret_policy.policy_text(doc),
        )
    _record_secrets_policy(ctx, doc)
    secrets = len({(g.service, g.arn) for g in grants})
    ctx.log(f"role {name}: {secret_policy.POLICY_NAME} reads exactly {secrets} referenced secret(s)")


def _record_secrets_policy(ctx: Context, doc: dict[str, Any] | None) -> None:
    """After the role has it: drift compares the role's copy with this (a crash before leaves the old one,
    and the re-run puts the policy again and records it)."""
    ids = aws_ids(ctx.infra)
    if ids.SecretsPolicy != (lines := secret_policy.summary(doc)):
        ids.SecretsPolicy = lines
        ctx.save()


def ensure_scheduler_role(aws: AwsClients, ctx: Context) -> str:
    """The scheduler's role with its one inline policy, both as this job wants them; returns its ARN."""
    iam, ids = aws.iam, aws_ids(ctx.infra)
    name = naming.scheduler_role_name(ctx.spec)
    ids.SchedulerRoleName = name
    ctx.save()  # intent first: a crash after the create leaves a name that teardown looks up
    account = scheduler_role.account_id(aws, ctx)
    trust = scheduler_role.trust_policy(account, ctx.spec.provider.region, naming.schedule_group_name(ctx.spec))
    allow = scheduler_role.permissions_policy(ctx.tagger, account, ctx.spec.provider.region)
    try:
        role = aws_call(
            iam.create_role,
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(trust, sort_keys=True),
            Description=f"vmplane scheduler role for {ctx.spec.org}/{ctx.spec.name}: start/stop its VMs only",
            Tags=tag_list(ctx.tagger.tags("iam-role", name)),
        )["Role"]
    except ConflictError:
        _check_ours(aws, ctx, name)
        role = aws_call(iam.get_role, RoleName=name)["Role"]
        if role.get("AssumeRolePolicyDocument") != trust:
            aws_call(iam.update_assume_role_policy, RoleName=name, PolicyDocument=json.dumps(trust, sort_keys=True))
    current: Mapping[str, Any]
    try:
        current = aws_call(iam.get_role_policy, RoleName=name, PolicyName=scheduler_role.POLICY_NAME)
    except NotFoundError:
        current = {}
    if current.get("PolicyDocument") != allow:  # put replaces by name: idempotent
        aws_call(
            iam.put_role_policy,
            RoleName=name,
            PolicyName=scheduler_role.POLICY_NAME,
            PolicyDocument=json.dumps(allow, sort_keys=True),
        )
    ids.SchedulerRoleArn = str(role["Arn"])
    ctx.save()
    ctx.log(f"scheduler role {name}: ec2:StartInstances/StopInstances on this job's instances only")
    return ids.SchedulerRoleArn


def delete_scheduler_role(aws: AwsClients, ctx: Context) -> None:
    """The scheduler's role, found by name and checked by tag; already gone is done."""
    ids = aws_ids(ctx.infra)
    name = ids.SchedulerRoleName or naming.scheduler_role_name(ctx.spec)
    if _owned(ctx, role_tags(aws, name), "role", name):
        _delete_role(aws, name)
        ctx.log(f"deleted scheduler role {name}")
    ids.SchedulerRoleName = ids.SchedulerRoleArn = None
    ctx.save()


def _delete_role(aws: AwsClients, name: str) -> None:
    """A role's policies, then the role (a crash between two calls leaves the rest to do)."""
    iam = aws.iam
    for p in aws_call(iam.list_attached_role_policies, RoleName=name)["AttachedPolicies"]:
        arn = p["PolicyArn"]
        deletes.delete(partial(aws_call, iam.detach_role_policy, RoleName=name, PolicyArn=arn), what=f"detach {arn}")
    for pol in aws_call(iam.list_role_policies, RoleName=name)["PolicyNames"]:
        deletes.delete(
            partial(aws_call, iam.delete_role_policy, RoleName=name, PolicyName=pol), what=f"delete policy {pol}"
        )
    # DeleteConflict while an instance profile still holds the role (eventual consistency): retried.
    deletes.delete(partial(aws_call, iam.delete_role, RoleName=name), what=f"delete role {name}")


def _owned(ctx: Context, fetch_tags: Callable[[], TagList], kind: str, name: str) -> bool:
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
def role_tags(aws: AwsClients, name: str) -> Callable[[], TagList]:
    return lambda: list(aws_call(aws.iam.list_role_tags, RoleName=name)["Tags"])


def profile_tags(aws: AwsClients, name: str) -> Callable[[], TagList]:
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
        _delete_role(aws, name)
    aws_ids(ctx.infra).RoleName = aws_ids(ctx.infra).InstanceProfileName = aws_ids(ctx.infra).InstanceProfileArn = None
    aws_ids(ctx.infra).SecretsPolicy = []
    ctx.save()
    delete_scheduler_role(aws, ctx)  # looked up whatever the spec says: a schedule may have been removed
