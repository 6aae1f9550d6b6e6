"""The cost part of a plan: a new environment's monthly estimate, or for a change the estimate before
and after and the difference (total and scheduled total), with the lines that changed.

`scheduledTotal` compares what is billed with the schedules: an environment without one is billed its
24x7 total, so adding a schedule shows a negative scheduled difference and no change of the total.
"""

from __future__ import annotations

from typing import Any

from vmplane.cost.estimate import Estimate, Line, estimate
from vmplane.envspec.models import EnvSpec


def _monthly(est: Estimate | None) -> dict[str, Any]:
    if est is None:  # nothing (a teardown's after)
        return {"total": 0.0, "scheduledTotal": None, "savingPercent": None}
    return dict(est.to_json()["monthly"])


def _billed(monthly: dict[str, Any]) -> float:
    """What a month is billed with the schedules (the total where there is none)."""
    scheduled = monthly["scheduledTotal"]
    return float(monthly["total"] if scheduled is None else scheduled)


def _key(line: Line) -> tuple[str, str | None, str]:
    return line.kind, line.pool, line.type


def _line_changes(before: Estimate | None, after: Estimate | None) -> list[dict[str, Any]]:
    old = {_key(line): line for line in before.lines} if before else {}
    new = {_key(line): line for line in after.lines} if after else {}
    out = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[0], k[1] or "", k[2])):
        a, b = old.get(key), new.get(key)
        was = a.monthly if a else 0.0
        now = b.monthly if b else 0.0
        was_s = (a.scheduledMonthly if a.scheduledMonthly is not None else a.monthly) if a else 0.0
        now_s = (b.scheduledMonthly if b.scheduledMonthly is not None else b.monthly) if b else 0.0
        if was == now and was_s == now_s:
            continue
        kind, pool, type_ = key
        delta = None if was is None or now is None else round(now - was, 2)
        scheduled = None if was_s is None or now_s is None else round(now_s - was_s, 2)
        out.append({"kind": kind, "pool": pool, "type": type_, "before": was, "after": now, "delta": delta,
                    "scheduledDelta": scheduled})  # fmt: skip
    return out


def plan_cost(before: EnvSpec | None, after: EnvSpec | None) -> dict[str, Any]:
    """The `cost` object of a plan: `before` None for a new environment, `after` None for a teardown."""
    old = estimate(before) if before is not None else None
    new = estimate(after) if after is not None else None
    monthly_after = _monthly(new)
    missing = sorted({*(old.missing if old else []), *(new.missing if new else [])})
    out: dict[str, Any] = {
        "currency": "USD",
        "before": _monthly(old) if before is not None else None,
        "after": monthly_after,
        "delta": None,
        "lines": _line_changes(old, new) if before is not None else [],
        "missing": missing,
        "complete": not missing,
    }
    if before is not None:
        monthly_before = out["before"]
        out["delta"] = {
            "total": round(monthly_after["total"] - monthly_before["total"], 2),
            "scheduledTotal": round(_billed(monthly_after) - _billed(monthly_before), 2),
        }
    return out
