"""What the crash sweeps (AWS and GCP) share: turning a clean run's per-step API-call tally into the
kill points to test, and pytest parameters with the emulator gaps marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


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
