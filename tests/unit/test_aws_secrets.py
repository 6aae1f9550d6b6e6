"""clouds/aws/secrets.py and the VM role's secrets policy against moto: the checks name the field and the
reference, versions come from metadata, and the role reads exactly the referenced secrets (read back)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vmplane.clouds.aws import iam, preflight, secret_policy
from vmplane.clouds.aws.capabilities import static_problems
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.secret_access import SecretProblemsError
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import secret_refs
from vmplane.observe import redact

from .support import REGION, make_ctx, variant

ROLE = "vmplane-acme-demo-fixed-vm"
DB_VALUE = "db-pw-7f3a9c-not-for-logs"


def with_secrets(spec: EnvSpec, env: dict[str, str], files: dict[str, str] | None = None) -> EnvSpec:
    runtime: dict[str, Any] = {"env": {k: {"secret": v} for k, v in env.items()}}
    runtime["files"] = {k: {"secret": v} for k, v in (files or {}).items()}
    return variant(spec, runtime=runtime)


def plant(aws: AwsClients) -> dict[str, str]:
    """A JSON secret (default key), a plain secret under a customer KMS key, a SecureString; their ARNs."""
    sm = aws.secretsmanager
    db = sm.create_secret(Name="prod/db", SecretString=json.dumps({"user": "app", "password": DB_VALUE}))["ARN"]
    key = aws.client("kms").create_key(Description="app key")["KeyMetadata"]["Arn"]
    api = sm.create_secret(Name="prod/api-token", SecretString="tok-91b2c3d4e5", KmsKeyId=key)["ARN"]
    aws.ssm.put_parameter(Name="/prod/tls-key", Value="-----PEM-ish-----", Type="SecureString")
    return {"db": db, "api": api, "key": key}


def role_policy(aws: AwsClients) -> dict[str, Any]:
    doc = aws.iam.get_role_policy(RoleName=ROLE, PolicyName=secret_policy.POLICY_NAME)["PolicyDocument"]
    return json.loads(doc) if isinstance(doc, str) else dict(doc)


def test_the_role_reads_exactly_the_referenced_secrets(aws_iam: AwsClients, spec: EnvSpec) -> None:
    aws = aws_iam
    arns = plant(aws)
    aws.secretsmanager.create_secret(Name="prod/unreferenced", SecretString="other-value")
    account = aws.sts.get_caller_identity()["Account"]
    s = with_secrets(
        spec,
        {"DB_USER": "aws-sm:prod/db#user", "DB_PASSWORD": "aws-sm:prod/db#password", "API": "aws-sm:prod/api-token"},
        {"/etc/app/tls.key": "aws-ssm:/prod/tls-key"},
    )
    iam.ensure_identity(aws, make_ctx(s))

    statements = role_policy(aws)["Statement"]
    reads = [st for st in statements if st["Action"] != secret_policy.KMS_DECRYPT]
    # One statement per secret (the two #keys of prod/db are one), each on exactly its ARN.
    assert sorted((st["Action"], st["Resource"]) for st in reads) == sorted(
        [
            ("secretsmanager:GetSecretValue", arns["db"]),
            ("secretsmanager:GetSecretValue", arns["api"]),
            ("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{account}:parameter/prod/tls-key"),
        ]
    )
    kms = [st for st in statements if st["Action"] == secret_policy.KMS_DECRYPT]
    assert kms == [
        {
            "Sid": secret_policy.sid("runtime.env.API", "Kms"),
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": arns["key"],
            "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"}},
        }
    ]
    assert "*" not in json.dumps(statements)  # nothing wider than the named resources
    assert len({st["Sid"] for st in statements}) == len(statements) == 4
    assert aws.iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == [secret_policy.POLICY_NAME]


def test_a_removed_reference_loses_its_statement_and_the_last_one_the_policy(
    aws_iam: AwsClients, spec: EnvSpec
) -> None:
    aws = aws_iam
    arns = plant(aws)
    both = with_secrets(spec, {"DB": "aws-sm:prod/db", "API": "aws-sm:prod/api-token"})
    iam.ensure_identity(aws, make_ctx(both))
    first = role_policy(aws)
    iam.ensure_identity(aws, make_ctx(both))  # again: the same document, Sids stable
    assert role_policy(aws) == first

    iam.ensure_identity(aws, make_ctx(with_secrets(spec, {"DB": "aws-sm:prod/db"})))
    assert [st["Resource"] for st in role_policy(aws)["Statement"]] == [arns["db"]]

    iam.ensure_identity(aws, make_ctx(spec))  # no reference: no access at all
    assert aws.iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []
    iam.ensure_identity(aws, make_ctx(spec))  # the policy already gone is done
    assert aws.iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []


def test_a_policy_removed_out_of_band_is_put_back(aws_iam: AwsClients, spec: EnvSpec) -> None:
    aws = aws_iam
    plant(aws)
    s = with_secrets(spec, {"DB": "aws-sm:prod/db"})
    iam.ensure_identity(aws, make_ctx(s))
    wanted = role_policy(aws)
    aws.iam.delete_role_policy(RoleName=ROLE, PolicyName=secret_policy.POLICY_NAME)
    iam.ensure_identity(aws, make_ctx(s))
    assert role_policy(aws) == wanted


def test_problems_name_the_field_and_the_reference(aws: AwsClients, spec: EnvSpec) -> None:
    plant(aws)
    sm = aws.secretsmanager
    sm.create_secret(Name="old/secret", SecretString="x-value-old")
    sm.delete_secret(SecretId="old/secret", RecoveryWindowInDays=7)
    sm.create_secret(Name="plain/text", SecretString="not json at all")
    aws.ssm.put_parameter(Name="/prod/plain", Value="visible", Type="String")
    refs = secret_refs(
        with_secrets(
            spec,
            {
                "OK": "aws-sm:prod/db#password",
                "MISSING": "aws-sm:prod/nope",
                "DELETED": "aws-sm:old/secret",
                "NOKEY": "aws-sm:prod/db#pass",
                "NOTJSON": "aws-sm:plain/text#k",
                "PLAIN": "aws-ssm:/prod/plain",
                "NOPARAM": "aws-ssm:/prod/absent",
                "PINNED": "aws-ssm:/prod/tls-key:1",
                "BADPIN": "aws-ssm:/prod/tls-key:7",
            },
        )
    )
    found = {p.split(": ", 1)[0]: p for p in AwsSecretAccess(aws).problems(refs)}
    assert sorted(found) == sorted(
        f"runtime.env.{n}" for n in ("MISSING", "DELETED", "NOKEY", "NOTJSON", "PLAIN", "NOPARAM", "BADPIN")
    )
    assert found["runtime.env.MISSING"] == (
        f"runtime.env.MISSING: aws-sm:prod/nope: no such secret in Secrets Manager ({REGION})"
    )
    assert "scheduled for deletion" in found["runtime.env.DELETED"]
    assert found["runtime.env.NOKEY"].endswith("the secret's JSON object has no key 'pass'")
    assert "not a JSON object" in found["runtime.env.NOTJSON"]
    assert "store secrets as SecureString" in found["runtime.env.PLAIN"]
    assert found["runtime.env.NOPARAM"].startswith("runtime.env.NOPARAM: aws-ssm:/prod/absent: no such parameter")
    assert "has no version 7 (its current version is 1)" in found["runtime.env.BADPIN"]
    # Reading a #key's value to check it leaves that value known to the redactor, never in a message.
    assert DB_VALUE not in json.dumps(found)
    assert redact.redact(f"x {DB_VALUE} y") == f"x {redact.MASK} y"


def test_preflight_refuses_with_every_problem_at_its_field(aws: AwsClients, spec: EnvSpec) -> None:
    s = with_secrets(spec, {"A": "aws-sm:nope-a"}, {"/etc/b.pem": "aws-ssm:/nope/b"})
    with pytest.raises(SecretProblemsError) as caught:
        preflight.check_secrets(aws, s)
    assert [p.split(": ", 1)[0] for p in caught.value.problems] == ["runtime.env.A", 'runtime.files["/etc/b.pem"]']


def test_versions_follow_the_store(aws: AwsClients, spec: EnvSpec) -> None:
    plant(aws)
    refs = secret_refs(
        with_secrets(
            spec, {"DB": "aws-sm:prod/db#password", "TLS": "aws-ssm:/prod/tls-key", "PIN": "aws-ssm:/prod/tls-key:1"}
        )
    )
    access = AwsSecretAccess(aws)
    before = access.versions(refs)
    current = aws.secretsmanager.describe_secret(SecretId="prod/db")["VersionIdsToStages"]
    assert before == {
        "aws-sm:prod/db#password": next(v for v, st in current.items() if "AWSCURRENT" in st),
        "aws-ssm:/prod/tls-key": "1",
        "aws-ssm:/prod/tls-key:1": "1",
    }
    new = aws.secretsmanager.put_secret_value(SecretId="prod/db", SecretString=json.dumps({"password": "rotated-1"}))
    aws.ssm.put_parameter(Name="/prod/tls-key", Value="rotated-pem", Type="SecureString", Overwrite=True)
    after = access.versions(refs)
    assert after["aws-sm:prod/db#password"] == new["VersionId"] != before["aws-sm:prod/db#password"]
    assert after["aws-ssm:/prod/tls-key"] == "2"
    assert after["aws-ssm:/prod/tls-key:1"] == "1"  # pinned: only the file changes it


def test_guest_source_names_the_regions_endpoints_or_the_sandbox() -> None:
    real = AwsSecretAccess(AwsClients(AwsTarget(region="eu-west-1"))).guest_source()
    assert real == {
        "cloud": "aws",
        "region": "eu-west-1",
        "endpoints": {
            "imds": "http://169.254.169.254",
            "secretsmanager": "https://secretsmanager.eu-west-1.amazonaws.com",
            "ssm": "https://ssm.eu-west-1.amazonaws.com",
        },
    }
    sandbox = AwsSecretAccess(AwsClients(AwsTarget(region=REGION, endpoint_url="http://127.0.0.1:5999")))
    assert sandbox.guest_source()["endpoints"] == {
        "imds": "http://169.254.169.254",
        "secretsmanager": "http://127.0.0.1:5999",
        "ssm": "http://127.0.0.1:5999",
    }


def test_a_policy_over_iams_size_limit_is_refused_by_validate_at_the_field(spec: EnvSpec) -> None:
    names = {f"S{i:03d}": f"aws-sm:team/{'x' * 120}/{i}" for i in range(60)}
    problems = static_problems(with_secrets(spec, names))
    assert len(problems) == 1
    field = problems[0].split(": ", 1)[0]
    assert field.startswith("runtime.env.S") and field != "runtime.env.S000"
    assert f"over IAM's {secret_policy.MAX_INLINE_CHARS}" in problems[0]
    assert static_problems(with_secrets(spec, dict(list(names.items())[:10]))) == []


def test_a_parameters_customer_key_named_by_alias_is_decrypted_through_ssm_only(aws: AwsClients, spec: EnvSpec) -> None:
    kms = aws.client("kms")
    key = kms.create_key(Description="params")["KeyMetadata"]["Arn"]
    kms.create_alias(AliasName="alias/app-params", TargetKeyId=key)
    aws.ssm.put_parameter(Name="/app/one", Value="v-one-123", Type="SecureString", KeyId="alias/app-params")
    aws.ssm.put_parameter(Name="/app/two", Value="v-two-123", Type="SecureString")  # aws/ssm: no kms statement
    refs = secret_refs(with_secrets(spec, {"ONE": "aws-ssm:/app/one", "TWO": "aws-ssm:/app/two"}))
    grants = AwsSecretAccess(aws).grants(refs, "111122223333")
    doc = secret_policy.policy_document(grants, REGION)
    assert doc is not None
    assert [(s["Action"], s["Resource"], s.get("Condition")) for s in doc["Statement"]] == [
        ("ssm:GetParameter", f"arn:aws:ssm:{REGION}:111122223333:parameter/app/one", None),
        ("ssm:GetParameter", f"arn:aws:ssm:{REGION}:111122223333:parameter/app/two", None),
        ("kms:Decrypt", key, {"StringEquals": {"kms:ViaService": f"ssm.{REGION}.amazonaws.com"}}),
    ]


def test_the_plan_lists_the_secrets_policy_only_with_references(spec: EnvSpec) -> None:
    from vmplane.clouds.aws.plan import provision_resources
    from vmplane.state import InfraConfig

    def policies(s: EnvSpec) -> list[tuple[str, str]]:
        return [(r.name, r.detail) for r in provision_resources(s, InfraConfig()) if r.type == "aws_iam_role_policy"]

    assert policies(spec) == []
    two = with_secrets(spec, {"A": "aws-sm:prod/db#user", "B": "aws-sm:prod/db#password", "C": "aws-ssm:/p/c"})
    assert policies(two) == [(f"{ROLE}/{secret_policy.POLICY_NAME}", "reads its 2 secret(s) only")]


def test_a_check_the_credentials_may_not_make_names_the_permission(
    aws: AwsClients, spec: EnvSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto enforces no IAM, so AWS's AccessDeniedException is played by the client itself."""
    from botocore.exceptions import ClientError

    def denied(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "Describe")

    monkeypatch.setattr(aws.secretsmanager, "describe_secret", denied)
    monkeypatch.setattr(aws.ssm, "describe_parameters", denied)
    refs = secret_refs(with_secrets(spec, {"A": "aws-sm:prod/a", "B": "aws-ssm:/prod/b"}))
    assert AwsSecretAccess(aws).problems(refs) == [
        "runtime.env.A: aws-sm:prod/a: the credentials may not read its metadata (AccessDeniedException): "
        "they need secretsmanager:DescribeSecret on it",
        "runtime.env.B: aws-ssm:/prod/b: the credentials may not read parameters' metadata "
        "(AccessDeniedException): they need ssm:DescribeParameters",
    ]


def test_two_keys_of_one_secret_read_its_value_once_and_describe_it_once(aws: AwsClients, spec: EnvSpec) -> None:
    from collections import Counter

    from vmplane.clouds.base import API_CALLS

    plant(aws)
    s = with_secrets(spec, {"U": "aws-sm:prod/db#user", "P": "aws-sm:prod/db#password", "T": "aws-ssm:/prod/tls-key"})
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        preflight.check_secrets(aws, s)  # the problems, then the grants for the size check
    finally:
        API_CALLS.reset(token)
    assert tally == Counter(
        {"secretsmanager.DescribeSecret": 1, "secretsmanager.GetSecretValue": 1, "ssm.DescribeParameters": 1}
    )


def test_drift_reports_the_secrets_policy_widened_or_removed_and_stepcreateiam_puts_it_back(
    aws_iam: AwsClients, spec: EnvSpec
) -> None:
    from vmplane.clouds.aws.drift import drift
    from vmplane.clouds.aws.ids import aws_ids

    aws = aws_iam
    arns = plant(aws)
    ctx = make_ctx(with_secrets(spec, {"DB": "aws-sm:prod/db"}))
    iam.ensure_identity(aws, ctx)
    assert aws_ids(ctx.infra).SecretsPolicy == [f"secretsmanager:GetSecretValue {arns['db']}"]

    def policy_drift() -> list[Any]:
        return [d for d in drift(aws, ctx) if d.kind == "iam-role-policy"]

    assert policy_drift() == []
    wide = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "secretsmanager:*", "Resource": "*"}]}
    aws.iam.put_role_policy(RoleName=ROLE, PolicyName=secret_policy.POLICY_NAME, PolicyDocument=json.dumps(wide))
    [changed] = policy_drift()
    assert changed.change.value == "changed" and changed.repairable
    assert [(f.field, f.actual) for f in changed.fields] == [("statements", ["secretsmanager:* *"])]
    iam.ensure_identity(aws, ctx)  # what stepCreateIAM does after the repair
    assert policy_drift() == []

    aws.iam.delete_role_policy(RoleName=ROLE, PolicyName=secret_policy.POLICY_NAME)
    [missing] = policy_drift()
    assert missing.change.value == "missing" and "stepCreateIAM" in missing.repair
    iam.ensure_identity(aws, ctx)
    assert policy_drift() == []

    iam.ensure_identity(aws, make_ctx(spec, ctx.infra))  # the last reference removed: nothing left to compare
    assert aws_ids(ctx.infra).SecretsPolicy == [] and policy_drift() == []
