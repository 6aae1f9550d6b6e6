"""What the crash sweeps (AWS and GCP) share: turning a clean run's per-step API-call tally into the
kill points to test, and pytest parameters with the emulator gaps marked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli
from tests.integration.test_crash_resume import kill_after


def apply_cases(job: dict[str, Any], case: Callable[[str], str | None]) -> list[str]:
    """Every distinct mutating call of the apply (its first call): `case` names a tallied call, or None."""
    return sorted({name for s in job["steps"] for op in s["apiCalls"] if (name := case(op))})


def destroy_cases(job: dict[str, Any], case: Callable[[str], str | None]) -> list[str]:
    """Every distinct mutating call of the destroy, once per teardown step that issues it (`name#N`:
    teardown steps run one after another, so the first call in a later step has a fixed count)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for step in job["teardownSteps"]:
        for op, n in step["apiCalls"].items():
            name = case(op)
            if name:
                out.add(name if name not in seen else f"{name}#{seen[name] + 1}")
                seen[name] = seen.get(name, 0) + n
    return sorted(out)


def params(phase: str, ops: list[str], xfail: dict[str, str]) -> list[Any]:
    """(index, operation) parameters; `xfail["phase:op"]` marks a known emulator gap (strict)."""
    return [
        pytest.param(i, op, id=op, marks=[pytest.mark.xfail(strict=True, reason=xfail[f"{phase}:{op}"])])
        if f"{phase}:{op}" in xfail
        else pytest.param(i, op, id=op)
        for i, op in enumerate(ops)
    ]


def assert_cases(applied: dict[str, Any], destroyed: dict[str, Any], case: Callable[[str], str | None],
                 apply_ops: list[str], destroy_ops: list[str]) -> None:  # fmt: skip
    """The sweep's lists are the reference run's calls; on drift, the message is the list to paste."""
    got_apply, got_destroy = apply_cases(applied, case), destroy_cases(destroyed, case)
    assert got_apply == apply_ops, f"APPLY_OPS = {got_apply!r}"
    assert got_destroy == destroy_ops, f"DESTROY_OPS = {got_destroy!r}"


def apply_killed_then_resumed(
    cli: Cli, env_file: Path, operation: str, snapshot: Callable[[str], Any], want: Any,
    differences: Callable[[Any, Any], list[str]],
) -> None:  # fmt: skip
    """kill -9 an apply right after `operation`, resume it: the account must hold what a clean run left."""
    args = ("apply", "-f", str(env_file), "--sandbox", "--yes")
    kill_after(cli, operation, *args)
    assert cli.json("status", "-f", str(env_file))["status"] == "running"
    job = cli.json(*args)
    assert job["status"] == "succeeded", job["error"]
    got = snapshot(job["id"])
    assert got == want, "\n".join(differences(got, want))
    gone = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]


def destroy_killed_then_resumed(cli: Cli, env_file: Path, operation: str, remaining: Callable[[str], Any]) -> None:
    """Apply, kill -9 the destroy right after `operation`, resume it: it ends `deleted`, nothing left."""
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    args = ("destroy", "-f", str(env_file), "--sandbox", "--yes")
    kill_after(cli, operation, *args)
    assert cli.json("status", job["id"])["status"] == "deleting"
    done = cli.json(*args)
    assert done["status"] == "deleted", done["error"]
    assert not remaining(job["id"])
