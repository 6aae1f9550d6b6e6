"""Secrets by reference on the AWS sandbox (moto's Secrets Manager and SSM behind the strict layer):
`vmplane plan` refuses a file whose secret is missing or stored in clear, exit 2 at the field, with
nothing recorded; the VM role's policy, put through the strict IAM layer, is read back; versions move
when the secret does. moto runs no VM: that the VM's fetcher can read with this policy is not shown here
(moto does not enforce IAM policies), only the policy IAM would enforce."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.unit.support import make_ctx

from vmplane.clouds.aws import iam, secret_policy
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.envspec.load import load_spec
from vmplane.envspec.secrets import secret_refs
from vmplane.jobs.precheck import UNBORN_JOB, positioned

REGION = "us-east-1"


def sandbox_aws(sandbox: Sandbox) -> AwsClients:
    return AwsClients(AwsTarget(region=REGION, endpoint_url=sandbox.endpoint))


def env_with(tmp_path: Path, name: str, env: dict[str, str], files: dict[str, str] | None = None) -> Path:
    runtime: dict[str, Any] = {
        "env": {"LOG_LEVEL": "info", **{k: {"secret": v} for k, v in env.items()}},
        "files": {k: {"secret": v} for k, v in (files or {}).items()},
    }
    return write_env(tmp_path, name, runtime=runtime)


@pytest.mark.sandbox
def test_plan_refuses_a_missing_secret_and_a_clear_parameter_at_their_fields(
    cli: Cli, sandbox: Sandbox, tmp_path: Path
) -> None:
    aws = sandbox_aws(sandbox)
    tag = uuid.uuid4().hex[:8]
    aws.secretsmanager.create_secret(Name=f"itest/{tag}/db", SecretString="itest-db-value-1")
    aws.ssm.put_parameter(Name=f"/itest/{tag}/plain", Value="in-clear", Type="String")
    env_file = env_with(
        tmp_path,
        f"itest-sec-{tag}",
        {"DB_PASSWORD": f"aws-sm:itest/{tag}/db", "API_TOKEN": f"aws-sm:itest/{tag}/missing"},
        {"/etc/app/conf": f"aws-ssm:/itest/{tag}/plain"},
    )
    before = cli.run("jobs", "--output", "json").stdout
    for args in (("plan",), ("apply", "--yes")):
        proc = cli.run(*args, "-f", str(env_file), "--sandbox")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        err = proc.stderr
        assert f"runtime.env.API_TOKEN: aws-sm:itest/{tag}/missing: no such secret in Secrets Manager ({REGION})" in err
        assert f'runtime.files["/etc/app/conf"]: aws-ssm:/itest/{tag}/plain: the parameter is a String' in err
        assert "store secrets as SecureString" in err and "nothing was recorded or created" in err
        assert "DB_PASSWORD" not in err  # the one that exists is no problem
        # One problem per field, each at its own line of the file (FILE:LINE:COL: field: why).
        text = env_file.read_text().splitlines()
        for key, field in (
            ('"API_TOKEN"', "runtime.env.API_TOKEN"),
            ('"/etc/app/conf"', 'runtime.files["/etc/app/conf"]'),
        ):
            line = next(i for i, t in enumerate(text, 1) if key in t)
            assert f"{env_file}:{line}:" in err and f": {field}: " in err, err
    assert cli.run("jobs", "--output", "json").stdout == before  # refused before any job
    driver = AwsDriver(AwsTarget(region=REGION, endpoint_url=sandbox.endpoint))
    issues = positioned(env_file, driver.precheck(load_spec(env_file), UNBORN_JOB)).issues
    assert [i.path for i in issues] == ["runtime.env.API_TOKEN", 'runtime.files["/etc/app/conf"]']

    aws.secretsmanager.create_secret(Name=f"itest/{tag}/missing", SecretString="itest-api-value-1")
    aws.ssm.put_parameter(Name=f"/itest/{tag}/plain", Value="now-secure", Type="SecureString", Overwrite=True)
    proc = cli.run("plan", "-f", str(env_file), "--sandbox")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.sandbox
def test_the_role_policy_through_the_strict_iam_layer_and_versions_on_rotation(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    aws = sandbox_aws(sandbox)
    tag = uuid.uuid4().hex[:8]
    db_arn = aws.secretsmanager.create_secret(
        Name=f"itest/{tag}/db", SecretString=json.dumps({"password": "itest-rot-1"})
    )["ARN"]
    aws.ssm.put_parameter(Name=f"/itest/{tag}/key", Value="itest-key-1", Type="SecureString")
    env_file = env_with(
        tmp_path,
        f"itest-pol-{tag}",
        {"DB_PASSWORD": f"aws-sm:itest/{tag}/db#password"},
        {"/k": f"aws-ssm:/itest/{tag}/key"},
    )
    spec = load_spec(env_file)
    driver = AwsDriver(AwsTarget(region=REGION, endpoint_url=sandbox.endpoint))
    ctx = make_ctx(spec, job_id=f"job-{tag}")
    try:
        create_identity(driver, ctx)
        role = iam.role_name(ctx)
        doc = aws.iam.get_role_policy(RoleName=role, PolicyName=secret_policy.POLICY_NAME)["PolicyDocument"]
        doc = json.loads(doc) if isinstance(doc, str) else doc
        account = aws.sts.get_caller_identity()["Account"]
        assert [(s["Action"], s["Resource"]) for s in doc["Statement"]] == [
            ("secretsmanager:GetSecretValue", db_arn),
            ("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{account}:parameter/itest/{tag}/key"),
        ]

        refs = secret_refs(spec)
        access = driver.secret_access()
        assert access.problems(refs) == []
        before = access.versions(refs)
        aws.secretsmanager.put_secret_value(SecretId=f"itest/{tag}/db", SecretString=json.dumps({"password": "r2"}))
        aws.ssm.put_parameter(Name=f"/itest/{tag}/key", Value="itest-key-2", Type="SecureString", Overwrite=True)
        after = access.versions(refs)
        assert after[f"aws-ssm:/itest/{tag}/key"] == "2" and before[f"aws-ssm:/itest/{tag}/key"] == "1"
        assert after[f"aws-sm:itest/{tag}/db#password"] != before[f"aws-sm:itest/{tag}/db#password"]
    finally:
        delete_identity(driver, ctx)
    assert not any(r["RoleName"] == iam.role_name(ctx) for r in aws.iam.list_roles()["Roles"])


@pytest.mark.sandbox
def test_the_strict_layer_checks_secrets_manager_against_its_model(sandbox: Sandbox) -> None:
    """A SecretId over the model's 2048 characters: AWS's front end refuses it; moto alone answers
    ResourceNotFoundException (no such secret), so the code says which of the two answered."""
    from botocore.exceptions import ClientError

    aws = sandbox_aws(sandbox)
    with pytest.raises(ClientError) as caught:
        aws.secretsmanager.describe_secret(SecretId="x" * 2049)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "secretId" in caught.value.response["Error"]["Message"]


@pytest.mark.sandbox
def test_apply_grants_the_role_its_secrets_and_destroy_takes_them_away(
    cli: Cli, sandbox: Sandbox, tmp_path: Path
) -> None:
    aws = sandbox_aws(sandbox)
    tag = uuid.uuid4().hex[:8]
    value = f"itest-apply-{tag}-value"
    arn = aws.secretsmanager.create_secret(Name=f"itest/{tag}/app", SecretString=json.dumps({"pw": value}))["ARN"]
    aws.ssm.put_parameter(Name=f"/itest/{tag}/tls", Value=f"pem-{value}", Type="SecureString")
    env_file = env_with(
        tmp_path,
        f"itest-ap-{tag}",
        {"APP_PW": f"aws-sm:itest/{tag}/app#pw"},
        {"/etc/tls.pem": f"aws-ssm:/itest/{tag}/tls"},
    )
    proc = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["status"] == "succeeded", job["error"]
    assert value not in proc.stdout + proc.stderr  # the #key check read it, and let nothing of it out
    role = job["config"]["infra"]["Cloud"]["RoleName"]
    doc = aws.iam.get_role_policy(RoleName=role, PolicyName=secret_policy.POLICY_NAME)["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    assert sorted(s["Resource"] for s in doc["Statement"]) == sorted(
        [arn, f"arn:aws:ssm:{REGION}:{aws.sts.get_caller_identity()['Account']}:parameter/itest/{tag}/tls"]
    )

    # Widened out of band: drift shows it (exit 3), and the repair's stepCreateIAM puts the exact one back.
    wide = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "secretsmanager:*", "Resource": "*"}]}
    aws.iam.put_role_policy(RoleName=role, PolicyName=secret_policy.POLICY_NAME, PolicyDocument=json.dumps(wide))
    found = cli.run("drift", "-f", str(env_file), "--sandbox", "--output", "json")
    assert found.returncode == 3, found.stdout + found.stderr
    [policy] = [d for d in json.loads(found.stdout)["drift"] if d["kind"] == "iam-role-policy"]
    assert policy["resource"] == f"aws_iam_role_policy.{role}/{secret_policy.POLICY_NAME}"
    assert policy["change"] == "changed" and policy["fields"][0]["actual"] == ["secretsmanager:* *"]
    fixed = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes", "--output", "json")
    assert fixed.returncode == 0 and json.loads(fixed.stdout)["status"] == "succeeded", fixed.stdout + fixed.stderr
    again = aws.iam.get_role_policy(RoleName=role, PolicyName=secret_policy.POLICY_NAME)["PolicyDocument"]
    assert (json.loads(again) if isinstance(again, str) else again) == doc

    # A referenced secret gone after the apply: an update (here the same file, whose push is due) is
    # refused before anything is recorded, at the field, as a new job would be.
    aws.ssm.delete_parameter(Name=f"/itest/{tag}/tls")
    ops_before = cli.json("status", job["id"])["config"].get("operations")
    refused = cli.run("plan", "-f", str(env_file), "--sandbox")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = next(i for i, t in enumerate(env_file.read_text().splitlines(), 1) if '"/etc/tls.pem"' in t)
    assert f"{env_file}:{line}:" in refused.stderr and 'runtime.files["/etc/tls.pem"]: aws-ssm:' in refused.stderr
    assert cli.run("apply", "-f", str(env_file), "--sandbox", "--yes").returncode == 2
    assert cli.json("status", job["id"])["config"].get("operations") == ops_before
    aws.ssm.put_parameter(Name=f"/itest/{tag}/tls", Value=f"pem-{value}", Type="SecureString")

    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert not any(r["RoleName"] == role for r in aws.iam.list_roles()["Roles"])
    # The secrets are the user's: destroy leaves them as they were.
    assert aws.secretsmanager.describe_secret(SecretId=arn).get("DeletedDate") is None
