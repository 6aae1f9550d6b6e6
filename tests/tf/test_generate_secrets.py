"""`vmplane tf generate` of a file with secret references: the stack holds the references (runtime
inputs), never a data source that reads a value, and grants the VMs exactly the referenced secrets, the
grants derived in HCL from inputs.runtime.tf. The HCL is evaluated by `terraform console` on the inputs
and the grant locals alone (no provider needed), so the names granted are Terraform's, not a re-reading."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.tf.test_gcp_policy import scan
from tests.tf.test_policy import checkov

from vmplane.envspec.impact import Impact
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.jobs.service import spec_json
from vmplane.tf.aws.secrets import POLICY_NAME, SECRET_LOCALS
from vmplane.tf.gcp.secrets import secrets_tf as gcp_secrets_tf
from vmplane.tf.generate import generate, write
from vmplane.tf.hcl import Block, Expr, Item, render
from vmplane.tf.inputs import split

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AWS_RUNTIME = {
    "env": {
        "LOG_LEVEL": "info",
        "DB_PASSWORD": {"secret": "aws-sm:prod/db#password"},
        "DB_USER": {"secret": "aws-sm:prod/db#user"},  # the same secret again: granted once
        "API_TOKEN": "plain-but-named-like-a-secret",
    },
    "files": {"/etc/app/tls.key": {"secret": "aws-ssm:/prod/app/tls-key:3"}},
}
GCP_RUNTIME = {
    "env": {
        "LOG_LEVEL": "info",
        "DB_PASSWORD": {"secret": "gcp-sm:db-pass"},
        "DB_OLD": {"secret": "gcp-sm:db-pass/versions/3"},
    },
    "files": {"/etc/app/tls.key": {"secret": "gcp-sm:projects/other-proj-1/secrets/tls/versions/2"}},
}
# Data sources that would put a secret's value into the plan and the state.
VALUE_READERS = re.compile(
    r'data "(aws_secretsmanager_secret_version|aws_secretsmanager_secrets|google_secret_manager_secret_version'
    r'|google_secret_manager_secret_version_access|aws_ssm_parameters_by_path)"'
)


def with_runtime(example: str, runtime: dict[str, Any]) -> EnvSpec:
    doc = copy.deepcopy(spec_json(load_spec(EXAMPLES / example)))
    doc["runtime"] = runtime
    return EnvSpec.model_validate(doc)


def terraform() -> str:
    exe = shutil.which("terraform") or shutil.which("tofu")
    if exe is None:
        pytest.skip("neither terraform nor tofu is on PATH")
    return exe


def console(spec: EnvSpec, grants: list[Item], expr: str, tmp_path: Path) -> Any:
    """`expr` as Terraform evaluates it over the generated inputs and the grants' locals (no provider)."""
    files = generate(spec)
    for name in ("vmplane.env.inputs.runtime.tf", "vmplane.env.inputs.infra.tf"):
        (tmp_path / name).write_text(files[name])
    (tmp_path / "grants.tf").write_text(render([i for i in grants if isinstance(i, Block) and i.type == "locals"]))
    proc = subprocess.run(
        [terraform(), "console"],
        input=f"jsonencode({expr})\n",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "TF_CLI_CONFIG_FILE": "/dev/null", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(json.loads(proc.stdout.strip()))


def test_references_are_runtime_inputs_and_nothing_reads_a_value() -> None:
    spec = with_runtime("fixed.jsonc", AWS_RUNTIME)
    groups = split(spec_json(spec))
    assert groups[Impact.runtime]["runtime"]["env"]["DB_PASSWORD"] == {"secret": "aws-sm:prod/db#password"}
    assert all("runtime" not in groups[i] for i in Impact if i is not Impact.runtime)
    files = generate(spec)
    runtime = files["vmplane.env.inputs.runtime.tf"]
    assert 'secret = "aws-sm:prod/db#password"' in runtime and 'secret = "aws-ssm:/prod/app/tls-key:3"' in runtime
    tf = "".join(text for name, text in files.items() if name.endswith(".tf"))
    assert not VALUE_READERS.search(tf)
    # The one SSM data source is the public image pointer, never a referenced parameter.
    assert re.findall(r'data "aws_ssm_parameter" "(\w+)"', tf) == ["image"]
    assert 'data "aws_secretsmanager_secret" "ref"' in files["vmplane.env.roles.tf"]


def test_a_plain_value_named_like_a_secret_is_flagged_in_the_stack() -> None:
    runtime = generate(with_runtime("fixed.jsonc", AWS_RUNTIME))["vmplane.env.inputs.runtime.tf"]
    flagged = [line for line in runtime.splitlines() if line.startswith("# runtime.env.")]
    assert len(flagged) == 1 and flagged[0].startswith("# runtime.env.API_TOKEN: looks like a secret")
    assert "# WARNING" not in generate(load_spec(EXAMPLES / "fixed.jsonc"))["vmplane.env.inputs.runtime.tf"]


@pytest.mark.parametrize("example", ["fixed.jsonc", "web.jsonc", "gcp-fixed.jsonc", "gcp-web.jsonc"])
def test_no_reference_no_grant(example: str) -> None:
    roles = generate(load_spec(EXAMPLES / example))["vmplane.env.roles.tf"]
    for kind in ('aws_iam_role_policy" "secrets', "aws_secretsmanager_secret", "secret_manager_secret_iam"):
        assert kind not in roles


def test_aws_one_statement_per_secret_from_the_inputs(tmp_path: Path) -> None:
    spec = with_runtime("fixed.jsonc", AWS_RUNTIME)
    roles = generate(spec)["vmplane.env.roles.tf"]
    assert roles.count('resource "aws_iam_role_policy" "secrets"') == 1 and f'"{POLICY_NAME}"' in roles
    assert '"aws-sm:${n}" => s.arn' in roles  # the ARN from metadata, never a value
    # The statements read data sources (a provider): Terraform evaluates what they are made of.
    names = Block("locals")
    for local in ("secret_refs", "secret_fields", "first_fields", "sid_words", "sm_secrets"):
        names.attr(local, Expr(SECRET_LOCALS[local]))
    sids = '{ for f, k in local.first_fields : k => "${local.sid_words[f]}${substr(sha256(f), 0, 8)}" }'
    refs, fields, sm, got_sids = console(
        spec, [names], f"[local.secret_refs, local.secret_fields, local.sm_secrets, {sids}]", tmp_path
    )
    assert refs == {
        "runtime.env.DB_PASSWORD": "aws-sm:prod/db#password",
        "runtime.env.DB_USER": "aws-sm:prod/db#user",
        'runtime.files["/etc/app/tls.key"]': "aws-ssm:/prod/app/tls-key:3",
    }
    # The key and the pinned version are not part of a grant; one secret, two fields: one grant.
    assert fields == {
        "aws-sm:prod/db": ["runtime.env.DB_PASSWORD", "runtime.env.DB_USER"],
        "aws-ssm:/prod/app/tls-key": ['runtime.files["/etc/app/tls.key"]'],
    }
    assert sm == ["prod/db"]
    # The direct pipeline's Sids: the first field's words, then 8 hex of its sha256.
    digest = {f: hashlib.sha256(f.encode()).hexdigest()[:8] for f in refs}
    assert got_sids == {
        "aws-sm:prod/db": "EnvDBPASSWORD" + digest["runtime.env.DB_PASSWORD"],
        "aws-ssm:/prod/app/tls-key": "FilesEtcAppTlsKey" + digest['runtime.files["/etc/app/tls.key"]'],
    }


def test_editing_a_reference_changes_only_the_runtime_inputs() -> None:
    before = generate(with_runtime("fixed.jsonc", AWS_RUNTIME))
    edited = copy.deepcopy(AWS_RUNTIME)
    edited["env"]["DB_PASSWORD"] = {"secret": "aws-sm:prod/db2#password"}
    after = generate(with_runtime("fixed.jsonc", edited))
    assert [n for n in before if before[n] != after[n]] == ["vmplane.env.inputs.runtime.tf"]


def test_gcp_one_binding_per_secret_on_the_secret(tmp_path: Path) -> None:
    spec = with_runtime("gcp-fixed.jsonc", GCP_RUNTIME)
    roles = generate(spec)["vmplane.env.roles.tf"]
    assert roles.count('resource "google_secret_manager_secret_iam_member" "vm"') == 1
    assert 'role      = "roles/secretmanager.secretAccessor"' in roles
    assert "google_secret_manager_secret_version" not in roles
    ids = console(spec, gcp_secrets_tf(spec), "local.gcp_secret_ids", tmp_path)
    project = spec.provider.project
    assert ids == {
        "db-pass": {"project": project, "secret_id": "db-pass"},  # twice referenced, bound once
        "projects/other-proj-1/secrets/tls": {"project": "other-proj-1", "secret_id": "tls"},
    }


@pytest.mark.parametrize(("example", "runtime"), [("fixed.jsonc", AWS_RUNTIME), ("gcp-fixed.jsonc", GCP_RUNTIME)])
def test_fmt_clean(example: str, runtime: dict[str, Any], tmp_path: Path) -> None:
    write(generate(with_runtime(example, runtime)), tmp_path)
    proc = subprocess.run(
        [terraform(), "fmt", "-check", "-diff"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("example", "runtime"), [("fixed.jsonc", AWS_RUNTIME), ("gcp-fixed.jsonc", GCP_RUNTIME)])
def test_checkov_fails_nothing_on_the_grants(example: str, runtime: dict[str, Any], tmp_path: Path) -> None:
    """The google provider is not in the offline mirror: no plan or apply of the GCP stack here (its
    bindings are checked above by Terraform's own evaluation); checkov reads the text of both."""
    exe = checkov()
    write(generate(with_runtime(example, runtime)), tmp_path)
    failed = [(c["check_id"], c["resource"]) for c in scan(exe, tmp_path)["failed_checks"]]
    assert [f for f in failed if "secret" in f[1]] == []


@pytest.mark.parametrize("example", ["fixed.jsonc", "dev-schedule.jsonc"])
def test_the_account_data_sources_are_declared_once(example: str) -> None:
    """The scheduler's role (a scheduled Fixed pool) declares them too: never twice."""
    files = generate(with_runtime(example, AWS_RUNTIME))
    assert ('"aws_iam_role" "scheduler"' in files["vmplane.env.roles.tf"]) == (example == "dev-schedule.jsonc")
    tf = "".join(text for name, text in files.items() if name.endswith(".tf"))
    assert tf.count('data "aws_caller_identity" "current"') == 1 and tf.count('data "aws_partition" "current"') == 1
