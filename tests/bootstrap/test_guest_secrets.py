"""The VM-side secret fetcher run for real (a python3 subprocess, 3.8 where this machine has it) against
moto's Secrets Manager and SSM with a fake IMDSv2, and against a fake GCP metadata server + Secret Manager."""

from __future__ import annotations

import datetime
import json
import re
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from tests.bootstrap.guest_secrets_fakes import (
    CREDS,
    Served,
    aws_client,
    aws_source,
    run_fetcher,
)

from vmplane.bootstrap import guest_secrets as gs
from vmplane.bootstrap.guest_secrets_main import crc32c, sigv4_headers
from vmplane.bootstrap.runtime import RUNTIME_ENV_PATH
from vmplane.envspec.models import EnvSpec


def make_spec(cloud: str, env: dict[str, Any] | None = None, files: dict[str, Any] | None = None) -> EnvSpec:
    provider = (
        {"cloud": "aws", "region": "us-east-1"}
        if cloud == "aws"
        else {"cloud": "gcp", "project": "proj-one", "region": "us-central1"}
    )
    return EnvSpec.model_validate(
        {
            "name": "rt",
            "org": "acme",
            "provider": provider,
            "pools": {"web": {"mode": "fixed", "size": 1}},
            "bootstrap": {"mode": "bare"},
            "runtime": {"env": env or {}, "files": files or {}},
        }
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def planted(moto_url: str) -> dict[str, str]:
    """Fresh names in moto's store (the server lives for the module): a string, a JSON secret, a binary
    one, and an SSM SecureString with two versions."""
    tag = uuid.uuid4().hex[:8]
    sm, ssm = aws_client("secretsmanager", moto_url), aws_client("ssm", moto_url)
    names = {"db": f"db-{tag}", "api": f"api-{tag}", "bin": f"bin-{tag}", "param": f"/app/{tag}/key"}
    sm.create_secret(Name=names["db"], SecretString="pw-Xq7-db-value")
    sm.create_secret(Name=names["api"], SecretString=json.dumps({"token": "tok-Z9-api", "other": "no"}))
    sm.create_secret(Name=names["bin"], SecretBinary=b"\x00\x01binary-\xff-blob")
    ssm.put_parameter(Name=names["param"], Value="ssm-v1-value", Type="SecureString")
    ssm.put_parameter(Name=names["param"], Value="ssm-v2-value", Type="SecureString", Overwrite=True)
    return names


def aws_spec(n: dict[str, str]) -> EnvSpec:
    return make_spec(
        "aws",
        env={
            "LOG_LEVEL": "info",
            "DB_PASSWORD": {"secret": f"aws-sm:{n['db']}"},
            "API_TOKEN": {"secret": f"aws-sm:{n['api']}#token"},
            "SSM_LATEST": {"secret": f"aws-ssm:{n['param']}"},
            "SSM_PINNED": {"secret": f"aws-ssm:{n['param']}:1"},
        },
        files={"/srv/app/blob.bin": {"secret": f"aws-sm:{n['bin']}"}, "/srv/app/plain.txt": "plain"},
    )


def test_aws_secrets_land_in_root_only_files_and_only_changes_are_rewritten(
    tmp_path: Path, moto_url: str, imds: Served, planted: dict[str, str]
) -> None:
    root = tmp_path / "vm"
    plan = gs.fetch_plan(aws_spec(planted), aws_source(moto_url, imds.url), RUNTIME_ENV_PATH, str(root))
    assert "pw-Xq7" not in json.dumps(plan)  # references only
    env_file, blob = root / RUNTIME_ENV_PATH.lstrip("/"), root / "srv/app/blob.bin"

    proc = run_fetcher(plan, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert env_file.read_text().splitlines() == [
        "API_TOKEN=tok-Z9-api",
        "DB_PASSWORD=pw-Xq7-db-value",
        "LOG_LEVEL=info",
        "SSM_LATEST=ssm-v2-value",
        "SSM_PINNED=ssm-v1-value",
    ]
    assert blob.read_bytes() == b"\x00\x01binary-\xff-blob"
    assert mode(env_file) == mode(blob) == 0o600 and mode(blob.parent) == 0o755
    assert not (root / "srv/app/plain.txt").exists()  # plain files are the push script's, not the fetcher's
    assert proc.stdout.splitlines() == [str(env_file), str(blob)]
    assert not list(root.rglob("*.vmplane-tmp"))
    # IMDSv2: a session token first, then the role's credentials with it; one credential fetch per run.
    assert [(m, p) for m, p, _ in imds.requests] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"),
        ("GET", "/latest/meta-data/iam/security-credentials/vm-role"),
    ]

    again = run_fetcher(plan, tmp_path)
    assert again.returncode == 0 and again.stdout == ""

    aws_client("secretsmanager", moto_url).put_secret_value(SecretId=planted["db"], SecretString="pw-rotated")
    rotated = run_fetcher(plan, tmp_path)
    assert rotated.returncode == 0 and rotated.stdout.splitlines() == [str(env_file)]
    assert "DB_PASSWORD=pw-rotated" in env_file.read_text().splitlines()

    env_file.chmod(0o644)  # a widened mode is put back even when the content is the same
    assert run_fetcher(plan, tmp_path).stdout.splitlines() == [str(env_file)] and mode(env_file) == 0o600


def test_a_missing_secret_fails_naming_the_field_and_ref_and_writes_nothing(
    tmp_path: Path, moto_url: str, imds: Served, planted: dict[str, str]
) -> None:
    root = tmp_path / "vm"
    spec = make_spec(
        "aws",
        env={"DB_PASSWORD": {"secret": f"aws-sm:{planted['db']}"}},
        files={"/srv/x.key": {"secret": "aws-sm:no-such-secret"}},
    )
    proc = run_fetcher(gs.fetch_plan(spec, aws_source(moto_url, imds.url), RUNTIME_ENV_PATH, str(root)), tmp_path)
    assert proc.returncode == 1
    # AWS answers 400, moto 404: the fetcher reports the status and the store's error code, either way.
    assert re.search(
        r'runtime.files\["/srv/x.key"\] \(aws-sm:no-such-secret\): HTTP 40[04] ResourceNotFoundException', proc.stderr
    )
    assert "pw-Xq7" not in proc.stderr + proc.stdout
    assert not root.exists()  # the env file's secret was read, but nothing is written before all are


def test_a_missing_json_key_and_a_multiline_env_value_are_refused_without_the_value(
    tmp_path: Path, moto_url: str, imds: Served, planted: dict[str, str]
) -> None:
    source = aws_source(moto_url, imds.url)
    spec = make_spec("aws", env={"T": {"secret": f"aws-sm:{planted['api']}#nope"}})
    proc = run_fetcher(gs.fetch_plan(spec, source, RUNTIME_ENV_PATH, str(tmp_path / "vm")), tmp_path)
    assert proc.returncode == 1 and "runtime.env.T" in proc.stderr and "has no key 'nope'" in proc.stderr
    assert "tok-Z9" not in proc.stderr

    aws_client("secretsmanager", moto_url).create_secret(Name=f"{planted['db']}-ml", SecretString="line1\nline2")
    spec = make_spec("aws", env={"CERT": {"secret": f"aws-sm:{planted['db']}-ml"}})
    proc = run_fetcher(gs.fetch_plan(spec, source, RUNTIME_ENV_PATH, str(tmp_path / "vm")), tmp_path)
    assert proc.returncode == 1 and "runtime.env.CERT: the value spans lines" in proc.stderr
    assert "line1" not in proc.stderr and not (tmp_path / "vm").exists()


def test_no_role_on_the_vm_fails_at_once_on_a_4xx(tmp_path: Path, moto_url: str, imds: Served) -> None:
    imds.fail_next = [404]
    spec = make_spec("aws", env={"A": {"secret": "aws-sm:whatever"}})
    proc = run_fetcher(gs.fetch_plan(spec, aws_source(moto_url, imds.url), RUNTIME_ENV_PATH, str(tmp_path)), tmp_path)
    assert proc.returncode == 1 and "no role credentials from the instance metadata service: HTTP 404" in proc.stderr
    assert len(imds.requests) == 1  # a 4xx is not retried


def test_sigv4_matches_botocore() -> None:
    url, body = "http://127.0.0.1:5123/", b'{"SecretId": "db"}'
    now = datetime.datetime(2026, 12, 3, 14, 5, 9, tzinfo=datetime.UTC)
    creds = {"key": CREDS["AccessKeyId"], "secret": CREDS["SecretAccessKey"], "token": CREDS["Token"]}
    mine = sigv4_headers(creds, "eu-west-3", "secretsmanager", url, "secretsmanager.GetSecretValue", body, now)
    request = AWSRequest(
        method="POST", url=url, data=body, headers={k: v for k, v in mine.items() if k != "authorization"}
    )
    auth = SigV4Auth(
        Credentials(CREDS["AccessKeyId"], CREDS["SecretAccessKey"], CREDS["Token"]), "secretsmanager", "eu-west-3"
    )
    request.context["timestamp"] = mine["x-amz-date"]
    signature = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    assert mine["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={CREDS['AccessKeyId']}/20261203/eu-west-3/secretsmanager/aws4_request, "
        f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}, Signature={signature}"
    )


def test_crc32c_is_castagnoli() -> None:
    # The check value of CRC-32C (RFC 3720 B.4) and the empty input.
    assert crc32c(b"123456789") == 0xE3069283 and crc32c(b"") == 0


def gcp_source(served: Served) -> dict[str, Any]:
    return {"cloud": "gcp", "project": "proj-one", "endpoints": {"metadata": served.url, "secretmanager": served.url}}


def test_gcp_secret_manager_latest_and_pinned_versions(tmp_path: Path, gcp: Served) -> None:
    gcp.secrets[("proj-one", "db")] = {1: b"gcp-v1", 2: b"gcp-v2"}
    gcp.secrets[("proj-two", "tls")] = {1: b"-----BEGIN KEY-----\nabc\n"}
    root = tmp_path / "vm"
    spec = make_spec(
        "gcp",
        env={"DB": {"secret": "gcp-sm:db"}, "DB_OLD": {"secret": "gcp-sm:db/versions/1"}},
        files={"/etc/tls/key.pem": {"secret": "gcp-sm:projects/proj-two/secrets/tls"}},
    )
    plan = gs.fetch_plan(spec, gcp_source(gcp), RUNTIME_ENV_PATH, str(root))
    proc = run_fetcher(plan, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (root / RUNTIME_ENV_PATH.lstrip("/")).read_text() == "DB=gcp-v2\nDB_OLD=gcp-v1\n"
    assert (root / "etc/tls/key.pem").read_bytes() == b"-----BEGIN KEY-----\nabc\n"
    assert mode(root / "etc/tls/key.pem") == 0o600
    paths = [p for _, p, _ in gcp.requests]
    assert paths[0] == "/computeMetadata/v1/instance/service-accounts/default/token"
    assert sorted(paths[1:]) == [
        "/v1/projects/proj-one/secrets/db/versions/1:access",
        "/v1/projects/proj-one/secrets/db/versions/latest:access",
        "/v1/projects/proj-two/secrets/tls/versions/latest:access",
    ]

    gcp.secrets[("proj-one", "db")][3] = b"gcp-v3"
    proc = run_fetcher(plan, tmp_path)
    assert proc.stdout.splitlines() == [str(root / RUNTIME_ENV_PATH.lstrip("/"))]
    assert "DB=gcp-v3" in (root / RUNTIME_ENV_PATH.lstrip("/")).read_text()


def test_gcp_retries_a_5xx_and_fails_at_once_on_a_404(tmp_path: Path, gcp: Served) -> None:
    gcp.secrets[("proj-one", "db")] = {1: b"gcp-v1"}
    spec = make_spec("gcp", env={"DB": {"secret": "gcp-sm:db"}})
    gcp.fail_next = [503, 429]
    proc = run_fetcher(gs.fetch_plan(spec, gcp_source(gcp), RUNTIME_ENV_PATH, str(tmp_path / "vm")), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(gcp.requests) == 4  # the token after two refusals, then the secret

    gcp.requests.clear()
    spec = make_spec("gcp", env={"DB": {"secret": "gcp-sm:gone"}})
    proc = run_fetcher(gs.fetch_plan(spec, gcp_source(gcp), RUNTIME_ENV_PATH, str(tmp_path / "vm2")), tmp_path)
    assert proc.returncode == 1
    assert "runtime.env.DB (gcp-sm:gone): HTTP 404 NOT_FOUND" in proc.stderr
    assert len(gcp.requests) == 2 and not (tmp_path / "vm2").exists()


def test_retries_end_at_the_deadline(tmp_path: Path, gcp: Served) -> None:
    gcp.fail_next = [503] * 1000
    spec = make_spec("gcp", env={"DB": {"secret": "gcp-sm:db"}})
    plan = {**gs.fetch_plan(spec, gcp_source(gcp), RUNTIME_ENV_PATH, str(tmp_path / "vm")), "deadlineSeconds": 2}
    proc = run_fetcher(plan, tmp_path)
    assert proc.returncode == 1 and not (tmp_path / "vm").exists()
    assert (
        "runtime.env.DB (gcp-sm:db): no access token from the metadata server: HTTP 503 UNAVAILABLE, still "
        "failing at the deadline" in proc.stderr
    )
    assert 1 < len(gcp.requests) < 1000  # retried with backoff, then given up
