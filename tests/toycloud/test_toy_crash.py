"""The toy cloud killed (kill -9) right after each of its mutating calls, through the CLI as a plugin: the
resumed apply leaves what a clean apply leaves, the resumed destroy leaves nothing (the crash sweeps'
shared cases, tests/integration/sweep_cases.py). The state file is written atomically, so it survives."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli
from tests.integration.sweep_cases import Reference, assert_cases, killed_apply_then_killed_destroy, paired_params
from tests.toycloud.test_toy_cli import plugin_env, toy_file

APPLY_OPS = ["toy.CreateFirewall", "toy.CreateNetwork", "toy.CreateTemplate", "toy.CreateVm"]
DESTROY_OPS = ["toy.Delete", "toy.Delete#3", "toy.Delete#4", "toy.Delete#5"]


@dataclass
class ToyCli(Cli):
    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **plugin_env()}


def _case(op: str) -> str | None:
    return None if op.startswith(("toy.List", "toy.Get")) else op


def snapshot(state: Path, job_id: str) -> dict[str, Any]:
    """The whole toy cloud (its only tenant is this case's job), sorted, the job id replaced."""
    rows = json.loads(state.read_text())["resources"].values() if state.exists() else []
    text = re.sub(re.escape(job_id), "JOB", json.dumps(sorted(rows, key=lambda r: (r["kind"], r["name"]))))
    return {"resources": json.loads(text)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    tmp = tmp_path_factory.mktemp("toy-sweep-ref")
    cli, state = ToyCli(home=tmp / "home", sandbox_port=1), tmp / "cloud.json"
    spec = toy_file(tmp, state)
    applied = cli.json("apply", "-f", str(spec), "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    snap = snapshot(state, applied["id"])
    assert [r["kind"] for r in snap["resources"]] == ["firewall", "network", "template", "vm", "vm"]
    destroyed = cli.json("destroy", "-f", str(spec), "--yes")
    assert destroyed["status"] == "deleted", destroyed["error"]
    assert snapshot(state, applied["id"]) == {"resources": []}
    return Reference(applied, snap, destroyed)


def test_the_toy_sweep_covers_every_mutating_call(reference: Reference) -> None:
    assert_cases(reference.applied, reference.destroyed, _case, APPLY_OPS, DESTROY_OPS)


@pytest.mark.parametrize(("index", "apply_op", "destroy_op"), paired_params(APPLY_OPS, DESTROY_OPS, {}))
def test_toy_apply_then_destroy_killed_at_each_call_converge(
    reference: Reference, tmp_path: Path, index: int, apply_op: str | None, destroy_op: str | None
) -> None:
    cli, state = ToyCli(home=tmp_path / "home", sandbox_port=1), tmp_path / "cloud.json"
    spec = toy_file(tmp_path, state)
    killed_apply_then_killed_destroy(
        cli,
        spec,
        apply_op,
        destroy_op,
        lambda job_id: snapshot(state, job_id),
        reference.snapshot,
        lambda job_id: snapshot(state, job_id)["resources"],
        flags=(),
    )
