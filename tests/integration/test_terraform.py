"""The generated stack with the real `terraform`: fmt-clean, `init` and `validate` offline through the
provider mirror, and on the sandbox the same shape as the direct pipeline for the same file; `destroy`
removes it all. Skips with the reason where terraform or the mirror is absent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import boto3
import pytest
from tests.deps_servers import closed_mirrors
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources
from tests.integration.test_load_balancer import lb_parts


def tf(env: dict[str, str], cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["terraform", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"terraform {' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def sg_rules(sb: Sandbox, job_id: str) -> int:
    f = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    n = 0
    for g in sb.client("ec2").describe_security_groups(Filters=f)["SecurityGroups"]:
        for p in g["IpPermissions"] + g["IpPermissionsEgress"]:
            n += len(p["IpRanges"]) + len(p["UserIdGroupPairs"]) + len(p["Ipv6Ranges"]) + len(p["PrefixListIds"])
    return n


def shape(sb: Sandbox, job_id: str, domain: str) -> dict[str, int]:
    """Counts of everything tagged with the job (or, for DNS, named for the domain)."""
    out = {k: len(v) for k, v in job_resources(sb, job_id).items()}
    out |= {k: len(v) for k, v in lb_parts(sb, job_id, domain).items()}
    asg = sb.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    out["auto_scaling_groups"] = sum(
        1
        for g in asg
        if {"Key": "zop:jobId", "Value": job_id} in [{"Key": t["Key"], "Value": t["Value"]} for t in g["Tags"]]
    )
    out["security_group_rules"] = sg_rules(sb, job_id)
    return out


@pytest.mark.parametrize("example", ["fixed.jsonc", "web.jsonc"])
def test_generated_stack_is_fmt_clean_and_validates_offline(cli: Cli, tf_env, tmp_path: Path, example: str) -> None:
    env_file = write_env(tmp_path, "itest-tf-validate", example=example)
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(tmp_path / "stack"), extra_env=closed_mirrors())
    assert proc.returncode == 0, proc.stderr
    stack = tmp_path / "stack"
    tf(tf_env, stack, "fmt", "-check", "-diff")
    tf(tf_env, stack, "init", "-input=false", "-backend=false")
    assert "The configuration is valid" in tf(tf_env, stack, "validate", "-no-color").stdout


@pytest.mark.sandbox
@pytest.mark.slow(first=True)  # the suite's longest test (terraform's own waits): started first
def test_generated_stack_builds_the_same_shape_as_the_pipeline(
    cli: Cli, sandbox: Sandbox, tf_env, tmp_path: Path
) -> None:
    name = "itest-tf"
    domain = f"{name}.sandbox.vmplane.test"
    env_file = write_env(tmp_path, name, example="web.jsonc")

    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    direct = shape(sandbox, job["id"], domain)
    assert cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")["status"] == "deleted"

    stack = tmp_path / "stack"
    # The shipped manifests (al2023 and the NGINX image unpinned): the sandbox stack applies all the same.
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox")
    assert proc.returncode == 0, proc.stderr
    tf(tf_env, stack, "init", "-input=false")
    tf(tf_env, stack, "apply", "-auto-approve", "-input=false", "-no-color")
    stack_id = f"tf-acme-{name}"
    built = shape(sandbox, stack_id, domain)
    assert built == direct
    assert built["vpcs"] == 1 and built["subnets"] == 4 and built["nat"] == 1 and built["instances"] == 2
    assert built["lbs"] == 1 and built["listeners"] == 2 and built["certificates"] == 1 and built["records"] == 2

    tf(tf_env, stack, "destroy", "-auto-approve", "-input=false", "-no-color")
    assert not any(shape(sandbox, stack_id, domain).values())


@pytest.mark.sandbox
@pytest.mark.slow
def test_remote_state_is_created_once_and_terraform_uses_it(cli: Cli, sandbox: Sandbox, tf_env, tmp_path: Path) -> None:
    env_file = write_env(tmp_path, "itest-tf-state", state={"bucket": "itest-tfstate"})
    first = cli.json("tf", "state", "init", "-f", str(env_file), "--sandbox")
    assert first == {
        "bucket": "itest-tfstate",
        "key": "vmplane/acme/itest-tf-state/terraform.tfstate",
        "region": "us-east-1",
        "created": True,
    }
    again = cli.run("tf", "state", "init", "-f", str(env_file), "--sandbox")
    assert again.returncode == 2 and "already exists" in again.stderr and "nothing was overwritten" in again.stderr

    stack = tmp_path / "stack"
    assert cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox").returncode == 0
    tf(tf_env, stack, "init", "-input=false", "-no-color")
    plan = tf(tf_env, stack, "plan", "-input=false", "-no-color", "-lock=true").stdout
    assert "Plan:" in plan and "to add, 0 to change, 0 to destroy" in plan


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_scheduled_example_applies_past_the_precondition_on_the_sandbox(
    cli: Cli, sandbox: Sandbox, tf_env, tmp_path: Path
) -> None:
    """The AWS example no other terraform test applies (web.jsonc: the same shape above; fixed.jsonc:
    test_vmconfig_terraform), on a fresh home: its pools' al2023 and NGINX image are unpinned, and the
    sandbox stack's precondition does not stop it (nothing boots there). Its schedules go to the sandbox's
    EventBridge Scheduler too (the override once left them to AWS itself)."""
    env_file = write_env(tmp_path, "itest-tf-sched", example="dev-schedule.jsonc")
    stack = tmp_path / "stack"
    proc = cli.run("tf", "generate", "-f", str(env_file), "-d", str(stack), "--sandbox")
    assert proc.returncode == 0, proc.stderr
    assert "note: sandbox: a real VM would fail closed here: pools.web.image:" in proc.stderr
    tf(tf_env, stack, "init", "-input=false")
    tf(tf_env, stack, "apply", "-auto-approve", "-input=false", "-no-color")
    scheduler = boto3.client(
        "scheduler",
        endpoint_url=sandbox.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    groups = [g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"]]
    made = [g for g in groups if "itest-tf-sched" in g]
    assert made, groups
    assert scheduler.list_schedules(GroupName=made[0])["Schedules"]
    tf(tf_env, stack, "destroy", "-auto-approve", "-input=false", "-no-color")
