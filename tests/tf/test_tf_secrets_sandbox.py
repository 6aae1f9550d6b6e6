"""The generated AWS stack with secret references, applied with the real `terraform` on the sandbox: each
secret's value is planted in moto's Secrets Manager and SSM with a unique marker, and no byte of the
generated files, `plan -out`, `show -json` of it, or `terraform.tfstate` after the apply holds a marker.
The VM role's inline policy read back from the sandbox has one statement per referenced secret, on its
real ARN, and kms:Decrypt (through Secrets Manager only) on the customer key one of them is under.
(The GCP stack: the google provider is not in the offline mirror, so no plan or apply of it here;
tests/tf/test_generate_secrets.py checks its bindings with Terraform's own evaluation.)"""

from __future__ import annotations

import json
import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.tf.aws.secrets import POLICY_NAME

NAME = "itest-tf-secrets"
SM_NAME = f"{NAME}/db"
SSM_PATH = f"/{NAME}/tls-key"
CMK_NAME = f"{NAME}/api"
ACCOUNT = "123456789012"  # moto's account


def tf(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["terraform", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert proc.returncode == 0, f"terraform {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def contents(path: Path) -> bytes:
    """A file's bytes; a zip (the saved plan) with every member's bytes unpacked: compressed, a value
    would not be seen."""
    data = path.read_bytes()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            data += b"".join(z.read(n) for n in z.namelist())
    return data


def occurrences(markers: list[str], *roots: Path) -> dict[str, int]:
    """Every file under each root (the stack, its plan and state, .terraform), byte for byte."""
    found: dict[str, int] = {}
    for root in roots:
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            if ".terraform/providers" in path.as_posix():
                continue  # the provider's binary, from the mirror
            data = contents(path)
            n = sum(data.count(m.encode()) for m in markers)
            if n:
                found[str(path)] = n
    return found


@pytest.mark.sandbox
@pytest.mark.slow(first=True)  # terraform plans, applies and destroys a whole stack on the sandbox
@pytest.mark.timeout(900)  # ~290 s on a loaded 2-core machine
def test_plan_and_state_hold_references_only_and_the_role_reads_exactly_its_secrets(
    cli: Cli, sandbox: Sandbox, tf_env: dict[str, str], tmp_path: Path
) -> None:
    markers = [f"{kind}-marker-{uuid.uuid4().hex}" for kind in ("sm", "ssm", "ssm-v2", "cmk")]
    sm = sandbox.client("secretsmanager")
    arn = sm.create_secret(Name=SM_NAME, SecretString=json.dumps({"password": markers[0]}))["ARN"]
    # A secret under a customer managed key: its statement, and kms:Decrypt on the key via Secrets Manager.
    key_arn = sandbox.client("kms").create_key(Description=NAME)["KeyMetadata"]["Arn"]
    cmk_arn = sm.create_secret(Name=CMK_NAME, SecretString=markers[3], KmsKeyId=key_arn)["ARN"]
    ssm = sandbox.client("ssm")
    ssm.put_parameter(Name=SSM_PATH, Value=markers[1], Type="SecureString")
    ssm.put_parameter(Name=SSM_PATH, Value=markers[2], Type="SecureString", Overwrite=True)  # version 2
    runtime = {
        "env": {
            "LOG_LEVEL": "info",
            "DB_PASSWORD": {"secret": f"aws-sm:{SM_NAME}#password"},
            "API_KEY": {"secret": f"aws-sm:{CMK_NAME}"},
        },
        "files": {"/etc/app/tls.key": {"secret": f"aws-ssm:{SSM_PATH}:1"}},
    }
    pools = {
        "web": {"mode": "fixed", "size": 1, "instanceType": "t3.small", "image": "al2023", "arch": "amd64"},
    }
    env_file = write_env(tmp_path, NAME, runtime=runtime, pools=pools)
    stack = tmp_path / "stack"
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox")
    assert proc.returncode == 0, proc.stderr
    assert f"aws-sm:{SM_NAME}#password" in (stack / "vmplane.env.inputs.runtime.tf").read_text()
    assert occurrences(markers, stack) == {}

    tf(tf_env, stack, "init", "-input=false", "-no-color")
    tf(tf_env, stack, "plan", "-input=false", "-no-color", "-out=plan.bin")
    shown = tf(tf_env, stack, "show", "-json", "plan.bin").stdout
    (tmp_path / "plan.json").write_text(shown)
    assert f'"{SM_NAME}"' in shown  # the data source's name argument: the reference, read
    try:
        tf(tf_env, stack, "apply", "-input=false", "-no-color", "plan.bin")
        state = stack / "terraform.tfstate"
        assert arn in state.read_text()  # the ARN the stack passes, from metadata
        held = occurrences(markers, stack, tmp_path / "plan.json")
        assert held == {}
        assert {"plan.bin", "terraform.tfstate"} <= {p.name for p in stack.iterdir()}  # what was read

        # The stack's runtime record (a SecureString of local.runtime): references and plain values only.
        record = json.loads(
            ssm.get_parameter(Name=f"/vmplane/acme/{NAME}/runtime", WithDecryption=True)["Parameter"]["Value"]
        )
        assert record["env"] == {
            "LOG_LEVEL": "info",
            "DB_PASSWORD": {"secret": f"aws-sm:{SM_NAME}#password"},
            "API_KEY": {"secret": f"aws-sm:{CMK_NAME}"},
        }
        assert record["files"] == {"/etc/app/tls.key": {"secret": f"aws-ssm:{SSM_PATH}:1"}}

        iam = sandbox.client("iam")
        role = f"vmplane-acme-{NAME}-vm"
        doc = iam.get_role_policy(RoleName=role, PolicyName=POLICY_NAME)["PolicyDocument"]
        statements = [(s["Sid"][:-8], s["Action"], s["Resource"]) for s in doc["Statement"]]
        # One per secret in the order of its first field (the Sid's words: the direct pipeline's), then the key.
        assert statements == [
            ("EnvAPIKEY", "secretsmanager:GetSecretValue", cmk_arn),
            ("EnvDBPASSWORD", "secretsmanager:GetSecretValue", arn),
            ("FilesEtcAppTlsKey", "ssm:GetParameter", f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter{SSM_PATH}"),
            ("EnvAPIKEYKms", "kms:Decrypt", key_arn),
        ]
        assert doc["Statement"][-1]["Condition"] == {
            "StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}
        }
        assert all(s["Effect"] == "Allow" and s["Sid"].isalnum() for s in doc["Statement"])
        assert iam.list_role_policies(RoleName=role)["PolicyNames"] == [POLICY_NAME]
    finally:
        tf(tf_env, stack, "destroy", "-auto-approve", "-input=false", "-no-color")
        for secret in (arn, cmk_arn):
            sm.delete_secret(SecretId=secret, ForceDeleteWithoutRecovery=True)
        ssm.delete_parameter(Name=SSM_PATH)


def test_the_grep_sees_a_marker_in_a_file_and_inside_a_compressed_plan(tmp_path: Path) -> None:
    """The check above can fail: a value in a plain file, or deflated inside a zip (as in plan.bin), is found."""
    marker = f"control-{uuid.uuid4().hex}"
    (tmp_path / "state.json").write_text(json.dumps({"value": marker}))
    with zipfile.ZipFile(tmp_path / "plan.bin", "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("tfplan", (marker + "x" * 1000) * 3)
    assert marker.encode() not in (tmp_path / "plan.bin").read_bytes()  # compressed: a plain grep misses it
    assert occurrences([marker], tmp_path) == {str(tmp_path / "state.json"): 1, str(tmp_path / "plan.bin"): 3}
