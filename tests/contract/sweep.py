"""The crash sweep's mechanics (tests/contract/suite.py runs them for every cloud): turning a clean run's
per-step API-call tally into the kill points to test, pytest parameters with the emulator gaps marked, and
one case (an apply killed, resumed and compared, then its destroy killed and resumed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli
from tests.integration.test_crash_resume import kill_after

from vmplane.envspec.load import load_spec


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


def paired_params(apply_ops: list[str], destroy_ops: list[str], xfail: dict[str, str]) -> list[Any]:
    """(index, apply kill point, destroy kill point) cases: each case kills one apply and then, on the
    environment that apply converged to, one destroy, so every kill point of both lists is a case of its
    own while a case pays for one environment. The shorter list's tail pairs with None (a clean run).
    `xfail["phase:op"]` marks a known emulator gap (strict)."""
    out = []
    for i, (a, d) in enumerate(zip_longest(apply_ops, destroy_ops)):
        reasons = [xfail[k] for k in (f"apply:{a}", f"destroy:{d}") if k in xfail]
        marks = [pytest.mark.xfail(strict=True, reason="; ".join(reasons))] if reasons else []
        out.append(pytest.param(i, a, d, id=f"apply:{a or '-'}+destroy:{d or '-'}", marks=marks))
    return out


def assert_cases(applied: dict[str, Any], destroyed: dict[str, Any], case: Callable[[str], str | None],
                 apply_ops: list[str], destroy_ops: list[str]) -> None:  # fmt: skip
    """The sweep's lists are the reference run's calls; on drift, the message is the list to paste."""
    got_apply, got_destroy = apply_cases(applied, case), destroy_cases(destroyed, case)
    assert got_apply == apply_ops, f"APPLY_OPS = {got_apply!r}"
    assert got_destroy == destroy_ops, f"DESTROY_OPS = {got_destroy!r}"


@dataclass(frozen=True)
class Reference:
    """A clean run's apply job, the cloud's normalised snapshot after it, its destroy job, and the job of the
    apply run again on the converged environment with the writes the emulator saw it make (None: not run, or
    an emulator that keeps no request log)."""

    applied: dict[str, Any]
    snapshot: dict[str, Any]
    destroyed: dict[str, Any]
    rerun: dict[str, Any] | None = None
    rerun_writes: list[str] | None = None


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    """Where two normalised snapshots part, as `kind[i].field: got != want` lines (an assertion message, not
    a comparison of its own)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return [p for k in sorted(set(got) | set(want)) for p in differences(got.get(k), want.get(k), f"{where}.{k}")]
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [p for i, (g, w) in enumerate(zip(got, want, strict=True)) for p in differences(g, w, f"{where}[{i}]")]
    return [] if got == want else [f"{where}: {_short(got)} != {_short(want)}"]


def _short(value: Any) -> str:
    return json.dumps(value, default=repr)[:300]


def killed_apply_then_killed_destroy(
    cli: Cli, env_file: Path, apply_op: str | None, destroy_op: str | None, snapshot: Callable[[str], Any],
    want: Any, remaining: Callable[[str], Any],
    flags: tuple[str, ...] = ("--sandbox",),
) -> None:  # fmt: skip
    """kill -9 an apply right after `apply_op` and resume it: the account must hold what a clean run left.
    Then kill -9 the destroy right after `destroy_op` and resume it: it ends `deleted`, nothing left.
    `flags`: where the environment runs (the sandbox; none for Proxmox, whose fake is a real API to vmplane)."""
    args = ("apply", "-f", str(env_file), *flags, "--yes")
    if apply_op is not None:
        kill_after(cli, apply_op, *args)
        assert cli.recorded_status(load_spec(env_file).name) == "running"
    job = cli.json(*args)
    assert job["status"] == "succeeded", job["error"]
    got = snapshot(job["id"])
    assert got == want, f"apply killed after {apply_op}:\n" + "\n".join(differences(got, want)[:40])
    args = ("destroy", "-f", str(env_file), *flags, "--yes")
    if destroy_op is not None:
        kill_after(cli, destroy_op, *args)
        assert cli.recorded_status(job["id"]) == "deleting"
    done = cli.json(*args)
    assert done["status"] == "deleted", done["error"]
    left = remaining(job["id"])
    assert not left, f"destroy killed after {destroy_op} left {left}"
