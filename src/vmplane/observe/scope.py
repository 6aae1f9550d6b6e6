"""What is running in this thread: the job, its phase, the step, the org and the cloud.

Set where the runner runs a job or a step; copied into the threads a step starts (`clouds.parallel`,
`pipeline.stepgraph` run work in a copy of the caller's context), read by logs, metrics and spans.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Scope:
    job: str | None = None
    phase: str | None = None
    step: str | None = None
    org: str | None = None
    cloud: str | None = None

    def fields(self) -> dict[str, str]:
        """The known fields, for a log line or a span (never None values)."""
        out = {}
        for key in ("job", "step", "org", "cloud", "phase"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


EMPTY = Scope()
_SCOPE: contextvars.ContextVar[Scope] = contextvars.ContextVar("vmplane_scope", default=EMPTY)


def current() -> Scope:
    return _SCOPE.get()


@contextmanager
def scoped(**fields: str | None) -> Iterator[Scope]:
    """Narrow the current scope (e.g. add `step=`) for the body; the fields not given are kept."""
    scope = replace(_SCOPE.get(), **fields)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
