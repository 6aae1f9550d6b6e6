"""Drift: how the cloud differs from what the file and the job's record say, in neutral words.

A driver reads the cloud (never writes) into `Observed` resources, states what it expects from the spec
and the record as `Expected` ones, and `compare` lists the differences: `missing` (expected, not found),
`changed` (found, some field differs: each with its wanted and actual value) and `extra` (carrying the
job's tags but not expected). The driver's `repair_drift` makes the cloud match again; a resource the
user owns (an existing VPC's group) is reported and never changed (`owned=False`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class DriftChange(StrEnum):
    missing = "missing"
    changed = "changed"
    extra = "extra"


@dataclass(frozen=True)
class FieldDrift:
    field: str
    wanted: Any
    actual: Any

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "wanted": self.wanted, "actual": self.actual}


@dataclass(frozen=True)
class Drift:
    """One resource that differs. `resource` is its plan address (`<terraform type>.<name>`, as `vmplane
    plan` names it); `id` the cloud's id (None when missing and never recorded)."""

    resource: str
    kind: str
    id: str | None
    change: DriftChange
    fields: tuple[FieldDrift, ...] = ()
    repair: str = ""  # what `apply` does about it, in words
    repairable: bool = True  # False: reported only (the user's resource, or nothing vmplane can do)

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "kind": self.kind,
            "id": self.id,
            "change": self.change.value,
            "fields": [f.to_json() for f in self.fields],
            "repair": self.repair,
            "repairable": self.repairable,
        }

    def describe(self) -> str:
        """One line for a person: what differs and what apply does."""
        what = ", ".join(f"{f.field}: {f.wanted!r} -> {f.actual!r}" for f in self.fields)
        head = f"{self.resource} ({self.id})" if self.id else self.resource
        return (
            f"{head} {self.change.value}" + (f" [{what}]" if what else "") + (f"; {self.repair}" if self.repair else "")
        )


@dataclass(frozen=True)
class Observed:
    """A resource as the cloud reports it. `fields` hold what drift compares (JSON values; a set of rules
    as a sorted list); `tags` its tags or labels (Proxmox: its tokens as keys, values "")."""

    kind: str
    id: str
    name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Expected:
    """A resource the spec and the record say exists. It matches an Observed of its kind by `id` when the
    record holds one, else by `name`. `fields` are compared with the observed ones (a field the cloud did
    not report counts as drift); `tags` only for the keys given (a tag someone added is not drift)."""

    resource: str
    kind: str
    id: str | None = None
    name: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    owned: bool = True  # False: the user's (an existing network's); drift is reported, never repaired
    repair_missing: str = "created again under its name"
    repair_changed: str = "set back to what the file says"


EXTRA_REPAIR = "deleted: it carries the job's tags but the file does not ask for it"


def compare(
    expected: Iterable[Expected],
    observed: Iterable[Observed],
    *,
    extra_kinds: Iterable[str] = (),
    address: Callable[[str, str], str] | None = None,
) -> list[Drift]:
    """The differences, expected resources first (in their order), then the extras. `extra_kinds`: the kinds
    whose unmatched observed resources are `extra` (those found by the job's tags); an observed resource of
    another kind that nothing expects was read only to compare and is not reported. `address(kind, name)`:
    an extra's plan address (the driver's table knows the kind's Terraform type); `<kind>.<name>` without."""
    seen: set[tuple[str, str]] = set()
    pool = list(observed)
    out: list[Drift] = []
    for want in expected:
        got = _match(want, pool, seen)
        if got is None:
            repair = want.repair_missing if want.owned else "reported only: it is not vmplane's"
            out.append(Drift(want.resource, want.kind, want.id, DriftChange.missing, (), repair, want.owned))
            continue
        seen.add((got.kind, got.id))
        diffs = field_diffs(want, got)
        if diffs:
            repair = want.repair_changed if want.owned else "reported only: it is not vmplane's"
            out.append(Drift(want.resource, want.kind, got.id, DriftChange.changed, diffs, repair, want.owned))
    kinds = set(extra_kinds)
    for got in pool:
        if got.kind in kinds and (got.kind, got.id) not in seen:
            name = got.name or got.id
            where = address(got.kind, name) if address is not None else f"{got.kind}.{name}"
            out.append(Drift(where, got.kind, got.id, DriftChange.extra, (), EXTRA_REPAIR))
    return out


def _match(want: Expected, pool: list[Observed], seen: set[tuple[str, str]]) -> Observed | None:
    candidates = [o for o in pool if o.kind == want.kind and (o.kind, o.id) not in seen]
    if want.id is not None:
        return next((o for o in candidates if o.id == want.id), None)
    return next((o for o in candidates if want.name is not None and o.name == want.name), None)


def field_diffs(want: Expected, got: Observed) -> tuple[FieldDrift, ...]:
    out = [FieldDrift(k, v, got.fields.get(k)) for k, v in want.fields.items() if got.fields.get(k) != v]
    out += [FieldDrift(f"tags.{k}", v, got.tags.get(k)) for k, v in want.tags.items() if got.tags.get(k) != v]
    return tuple(out)


def counts(drift: Iterable[Drift]) -> dict[tuple[str, str], int]:
    """(kind, change) -> how many: the `vmplane_drift_resources` gauge's values."""
    out: dict[tuple[str, str], int] = {}
    for d in drift:
        key = (d.kind, d.change.value)
        out[key] = out.get(key, 0) + 1
    return out
