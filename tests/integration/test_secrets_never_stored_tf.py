"""The generated stack of the never-stored proof through the real `terraform` on the AWS sandbox: the
planted secrets' values in no plan file, `show -json`, state or output (see test_secrets_never_stored)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_secrets_never_stored import Evidence, plant_aws, secret_names

# -- the generated stack through terraform: plan, its JSON, the state ----------------------------


@pytest.mark.sandbox
@pytest.mark.slow(first=True)  # terraform plans and applies on the sandbox: started first
def test_terraform_plan_and_state_of_the_generated_stack_hold_no_value(sandbox: Sandbox, tmp_path: Path) -> None:
    """`tf generate --sandbox` of the same references, then `terraform plan -out` + `show -json`, `apply`,
    `terraform.tfstate`, `destroy`: the stack passes the secrets' names and ARNs (metadata-only data
    sources), never a value."""
    from tests.helpers import terraform_env

    tf_env, why = terraform_env(tmp_path)
    if tf_env is None:
        pytest.skip(why)
    planted = plant_aws(sandbox, uuid.uuid4().hex[:8])
    cli = Cli(home=tmp_path / "home", sandbox_port=sandbox.port, gcp_port=sandbox.gcp_port)
    env_file = write_env(tmp_path, "itest-leak-tf", example=planted.example, runtime=planted.runtime)
    stack = tmp_path / "stack"
    ev = Evidence()
    ev.proc("tf generate", cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox"))

    def tf(*args: str) -> None:
        proc = subprocess.run(["terraform", *args], cwd=stack, env=tf_env, capture_output=True, text=True, timeout=900)
        ev.proc(f"terraform {args[0]}", proc)
        assert proc.returncode == 0, f"terraform {' '.join(args)}: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"

    tf("init", "-input=false", "-no-color")
    tf("plan", "-input=false", "-no-color", "-out=plan.bin")
    shown = subprocess.run(
        ["terraform", "show", "-json", "plan.bin"], cwd=stack, env=tf_env, capture_output=True, timeout=300
    )
    assert shown.returncode == 0, shown.stderr
    ev.add("terraform show -json plan.bin", shown.stdout)
    tf("apply", "-input=false", "-no-color", "plan.bin")
    state = (stack / "terraform.tfstate").read_bytes()
    for name in secret_names(planted.runtime):  # the state does name the secrets (the grants need them)
        assert name.encode() in state, name
    tf("destroy", "-auto-approve", "-input=false", "-no-color")
    assert ev.tree("stack", stack) > 0  # the plan file, the state and its backup, the .tf files
    assert ev.found(planted.markers) == []
