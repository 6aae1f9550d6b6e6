"""Schedules in the generated AWS stack: scheduled actions for ASG pools, EventBridge Scheduler schedules
(and their start/stop-only role) for Fixed pools; the times are cloud inputs, so changing one changes
inputs.infra.tf only; a stack without a schedule has none of it. `terraform validate` where the
provider mirror exists."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.helpers import terraform_env

from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.tf.generate import generate, write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BERLIN = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}


def scheduled(stop: str = "19:00") -> EnvSpec:
    doc = load_spec(EXAMPLES / "web.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    for pool in doc["pools"].values():
        pool["schedule"] = {**BERLIN, "stop": stop}
    doc["pools"]["office"] = {"mode": "fixed", "size": 2, "schedule": {**BERLIN, "days": "Mon,Wed", "stop": stop}}
    return EnvSpec.model_validate(doc)


def test_the_schedules_and_their_role_are_in_the_stack() -> None:
    files = generate(scheduled())
    main, roles, infra = (files[f"vmplane.env.{n}.tf"] for n in ("main", "roles", "inputs.infra"))
    for resource in ("aws_autoscaling_schedule", "aws_scheduler_schedule_group", "aws_scheduler_schedule"):
        assert f'resource "{resource}"' in main
    assert 'arn:${data.aws_partition.current.partition}:scheduler:::aws-sdk:ec2:${each.value.kind}Instances"' in main
    assert "local.fixed_vms[k].pool == each.value.pool" in main  # exactly the pool's instances
    assert 'mode = "OFF"' in main and "ignore_changes = [min_size, desired_capacity]" in main
    assert 'resource "aws_iam_role" "scheduler"' in roles and 'Service = "scheduler.amazonaws.com"' in roles
    assert 'Action   = ["ec2:StartInstances", "ec2:StopInstances"]' in roles
    assert '("aws:ResourceTag/${local.prefix}jobId") = local.stack_id' in roles
    assert 'eventbridge = "cron(0 19 ? * MON,WED *)"' in infra and 'unix        = "0 19 * * 1,2,3,4,5"' in infra


def test_a_changed_schedule_changes_only_the_cloud_inputs() -> None:
    before, after = generate(scheduled()), generate(scheduled(stop="20:30"))
    assert {n for n in before if before[n] != after[n]} == {"vmplane.env.inputs.infra.tf"}


@pytest.mark.parametrize("example", ["fixed.jsonc", "web.jsonc"])
def test_no_schedule_no_schedule_resources(example: str) -> None:
    tf = "".join(text for name, text in generate(load_spec(EXAMPLES / example)).items() if name.endswith(".tf"))
    assert "schedule" not in tf.lower()


def test_the_scheduled_stack_validates(tmp_path: Path) -> None:
    env, why = terraform_env(tmp_path)
    if env is None:
        pytest.skip(why)
    stack = tmp_path / "stack"
    write(generate(scheduled()), stack)
    for args in (["fmt", "-check", "-diff"], ["init", "-input=false", "-backend=false"], ["validate", "-no-color"]):
        proc = subprocess.run(["terraform", *args], cwd=stack, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"terraform {' '.join(args)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
