"""One table per cloud: each resource kind a driver manages, declared once.

A `ResourceKind` says what the kind is called (the neutral kind, also a leftover's and a drift's), its
Terraform type (the plan's addresses and the generated stack's resources), the step that creates it and
the one that deletes it, the role tag it carries, and how it is observed (everything of the kind carrying
the job's tags, read-only) and deleted. Leftovers, the whole-job inventory, drift's `extra` resources and
the plan's resource types are derived from the table instead of being listed again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.drift import Observed
from vmplane.clouds.parallel import side_by_side

C = TypeVar("C")  # the driver's SDK clients


@dataclass(frozen=True)
class ResourceKind(Generic[C]):
    kind: str
    tf_type: str
    step: str  # the provisioning step that creates it
    teardown_step: str  # the teardown step that deletes it
    role: str | None = None  # the role tag vmplane gives it; None: the cloud cannot tag this kind
    # Everything of this kind carrying the job's tags (or, for a kind that cannot be tagged, found through
    # what does): read-only. None: not observed on its own (a part of another kind's resource).
    observe: Callable[[C, Context], list[Observed]] | None = None
    # Delete one by id; a resource already gone is done.
    delete: Callable[[C, Context, str], None] | None = None
    in_stack: bool = True  # False: the direct pipeline makes it, the generated stack does not (see `note`)
    direct: bool = True  # False: only the generated stack makes it (a part the SDK call makes implicitly)
    note: str = ""

    def address(self, name: str) -> str:
        """The plan address of one resource of this kind."""
        return f"{self.tf_type}.{name}"


@dataclass(frozen=True)
class ResourceTable(Generic[C]):
    cloud: str
    kinds: tuple[ResourceKind[C], ...]

    def __post_init__(self) -> None:
        names = [k.kind for k in self.kinds]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.cloud}: a resource kind is declared twice: {sorted(names)}")

    def kind(self, kind: str) -> ResourceKind[C]:
        for k in self.kinds:
            if k.kind == kind:
                return k
        raise KeyError(f"{self.cloud} declares no resource kind {kind!r}")

    def tf_type(self, kind: str) -> str:
        return self.kind(kind).tf_type

    def address(self, kind: str, name: str) -> str:
        """The plan address of one resource of `kind` (drift's extras are named so)."""
        return self.kind(kind).address(name)

    def tf_types(self) -> set[str]:
        return {k.tf_type for k in self.kinds}

    def stack_types(self) -> set[str]:
        """The Terraform types the generated stack may hold."""
        return {k.tf_type for k in self.kinds if k.in_stack}

    def direct_types(self) -> set[str]:
        """The Terraform types of what the direct pipeline makes (the plan's addresses)."""
        return {k.tf_type for k in self.kinds if k.direct}

    def observed_kinds(self) -> list[str]:
        return [k.kind for k in self.kinds if k.observe is not None]

    def observe(self, clients: C, ctx: Context, kinds: Iterable[str] | None = None) -> list[Observed]:
        """Every observable kind (or those named), one lookup per kind, side by side."""
        wanted = set(kinds) if kinds is not None else None
        calls = [
            partial(k.observe, clients, ctx)
            for k in self.kinds
            if k.observe is not None and (wanted is None or k.kind in wanted)
        ]
        return [o for found in side_by_side(*calls) for o in found]

    def leftovers(self, clients: C, ctx: Context) -> list[Leftover]:
        """What a clean teardown must leave none of: everything observed as the job's."""
        return [Leftover(o.kind, o.id) for o in self.observe(clients, ctx)]
