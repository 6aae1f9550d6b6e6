"""clouds/aws/iam.py against moto: the VM role gets the exec-channel policy and nothing else, owned by tag."""

from __future__ import annotations

import json

import pytest

from vmplane.clouds.aws import iam
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.errors import ConflictError

from .support import JOB_ID, SSM_POLICY_ARN, make_ctx, tags_of

ROLE = "vmplane-acme-demo-fixed-vm"


def _role_exists(aws, name=ROLE):
    return any(r["RoleName"] == name for r in aws.iam.list_roles()["Roles"])


def _profile_exists(aws, name=ROLE):
    return any(p["InstanceProfileName"] == name for p in aws.iam.list_instance_profiles()["InstanceProfiles"])


def _foreign_role(aws, tags):
    aws.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=iam.ASSUME_ROLE_POLICY, Tags=tags)


def test_role_and_profile_with_only_the_ssm_policy(aws_iam, spec):
    aws = aws_iam
    ctx = make_ctx(spec)
    iam.ensure_identity(aws, ctx)

    role = aws.iam.get_role(RoleName=ROLE)["Role"]
    trust = role["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "ec2.amazonaws.com"}]
    assert [p["PolicyArn"] for p in aws.iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]] == [
        SSM_POLICY_ARN
    ]
    assert aws.iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []  # no inline policies either
    role_tags = tags_of({"Tags": aws.iam.list_role_tags(RoleName=ROLE)["Tags"]})
    assert role_tags["zop:jobId"] == JOB_ID and role_tags["zop:role"] == "iam-role"

    profile = aws.iam.get_instance_profile(InstanceProfileName=ROLE)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
    assert tags_of(profile)["zop:jobId"] == JOB_ID

    infra = ctx.infra
    assert aws_ids(infra).RoleName == aws_ids(infra).InstanceProfileName == ROLE
    assert aws_ids(infra).InstanceProfileArn == profile["Arn"]
    assert ctx.save.calls >= 2
    # Intent first: the name was on record before the role was created.
    first = ctx.save.snapshots[0]["Cloud"]
    assert first["RoleName"] == ROLE and first["InstanceProfileArn"] is None
    assert ctx.save.last == infra.model_dump(mode="json")


def test_ensure_identity_is_idempotent_even_with_a_lost_record(aws_iam, spec):
    aws = aws_iam
    first = make_ctx(spec)
    iam.ensure_identity(aws, first)
    iam.ensure_identity(aws, first)
    again = make_ctx(spec)  # the checkpoint was lost
    iam.ensure_identity(aws, again)

    assert [r["RoleName"] for r in aws.iam.list_roles()["Roles"]] == [ROLE]
    assert [p["InstanceProfileName"] for p in aws.iam.list_instance_profiles()["InstanceProfiles"]] == [ROLE]
    profile = aws.iam.get_instance_profile(InstanceProfileName=ROLE)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [ROLE]
    attached = aws.iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]
    assert [p["PolicyArn"] for p in attached] == [SSM_POLICY_ARN]
    assert aws_ids(again.infra).InstanceProfileArn == aws_ids(first.infra).InstanceProfileArn


def test_a_stripped_policy_is_reattached(aws_iam, spec):
    aws = aws_iam
    ctx = make_ctx(spec)
    iam.ensure_identity(aws, ctx)
    aws.iam.detach_role_policy(RoleName=ROLE, PolicyArn=SSM_POLICY_ARN)
    iam.ensure_identity(aws, ctx)
    attached = aws.iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]
    assert [p["PolicyArn"] for p in attached] == [SSM_POLICY_ARN]


@pytest.mark.parametrize(
    "tags",
    [[{"Key": "zop:jobId", "Value": "job-someone-else"}], []],
    ids=["another-job", "not-vmplane"],
)
def test_a_role_of_the_same_name_owned_by_someone_else_is_never_taken_or_deleted(aws_iam, spec, tags):
    aws = aws_iam
    _foreign_role(aws, tags)
    ctx = make_ctx(spec)

    with pytest.raises(ConflictError, match=ROLE):
        iam.ensure_identity(aws, ctx)
    assert aws.iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"] == []  # not modified
    assert not _profile_exists(aws)

    with pytest.raises(ConflictError):
        iam.delete_identity(aws, ctx)
    assert _role_exists(aws)
    assert tags_of({"Tags": aws.iam.list_role_tags(RoleName=ROLE)["Tags"]}) == tags_of({"Tags": tags})


def test_the_conflict_names_the_owning_job(aws_iam, spec):
    _foreign_role(aws_iam, [{"Key": "zop:jobId", "Value": "job-someone-else"}])
    with pytest.raises(ConflictError, match="job-someone-else"):
        iam.ensure_identity(aws_iam, make_ctx(spec))


def test_delete_identity_removes_ours(aws_iam, spec):
    aws = aws_iam
    ctx = make_ctx(spec)
    iam.ensure_identity(aws, ctx)
    iam.delete_identity(aws, ctx)

    assert not _role_exists(aws)
    assert not _profile_exists(aws)
    assert aws_ids(ctx.infra).RoleName is None and aws_ids(ctx.infra).InstanceProfileName is None
    assert aws_ids(ctx.infra).InstanceProfileArn is None
    assert ctx.save.last == ctx.infra.model_dump(mode="json")
    # The managed policy itself is AWS's and is left alone.
    assert aws.iam.get_policy(PolicyArn=SSM_POLICY_ARN)["Policy"]["Arn"] == SSM_POLICY_ARN


def test_delete_identity_with_a_lost_record_and_twice(aws_iam, spec):
    aws = aws_iam
    iam.ensure_identity(aws, make_ctx(spec))
    iam.delete_identity(aws, make_ctx(spec))
    assert not _role_exists(aws) and not _profile_exists(aws)
    iam.delete_identity(aws, make_ctx(spec))  # nothing left: a no-op, not an error


def test_role_names_are_capped_at_64_chars(spec):
    from .support import variant

    long = variant(spec, name="a" * 32, org="b" * 32)
    name = iam.role_name(make_ctx(long))
    assert len(name) == 64
    assert name.startswith("vmplane-" + "b" * 32)
