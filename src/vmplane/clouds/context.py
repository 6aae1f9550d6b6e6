"""The context a step hands a driver's parts: the job's spec and record, its tag set, and the hooks that
save progress and tell the steps beside it what is ready; and the per-step tally of cloud API calls."""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

MANAGED_BY = "vmplane"

# A per-step tally of cloud API calls ("service.Operation" -> count). The pipeline sets a fresh
# Counter around each step; drivers' SDK hooks increment it. Recorded on the step (for bench/).
API_CALLS: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar("vmplane_api_calls", default=None)
_COUNT_LOCK = threading.Lock()  # a step's calls may run side by side (clouds.parallel)


def count_call(name: str) -> None:
    tally = API_CALLS.get()
    if tally is not None:
        with _COUNT_LOCK:
            tally[name] += 1


@dataclass(frozen=True)
class Tagger:
    """The tag set every resource carries: `<prefix>orgId/jobId/role/managedBy` plus the user's tags."""

    prefix: str
    org: str
    job_id: str
    env: str
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def job_key(self) -> str:
        return f"{self.prefix}jobId"

    @property
    def role_key(self) -> str:
        return f"{self.prefix}role"

    def tags(self, role: str, name: str | None = None) -> dict[str, str]:
        out = dict(self.extra)
        out.update(
            {
                f"{self.prefix}orgId": self.org,
                f"{self.prefix}jobId": self.job_id,
                f"{self.prefix}role": role,
                f"{self.prefix}managedBy": MANAGED_BY,
                f"{self.prefix}env": self.env,
            }
        )
        if name:
            out["Name"] = name
        return out

    @classmethod
    def for_spec(cls, spec: EnvSpec, job_id: str) -> Tagger:
        return cls(prefix=spec.tag_prefix, org=spec.org, job_id=job_id, env=spec.name, extra=dict(spec.tags))


@dataclass
class Context:
    """Everything a driver call needs; `save` persists `infra` (intent before acting)."""

    job_id: str
    spec: EnvSpec
    infra: InfraConfig
    tagger: Tagger
    save: Callable[[], None] = lambda: None
    log: Callable[[str], None] = lambda _msg: None
    # A milestone (`clouds.steps`) passed: what this step's dependents read is saved, they may start.
    reached: Callable[[str], None] = lambda _milestone: None
    # Blocks until the steps this one needs have ended (raises if one failed): see `early_steps`.
    wait_inputs: Callable[[], None] = lambda: None
    notes: list[str] = field(default_factory=list)  # what the user must read (shown after an operation)
    # pool -> digest of the vmconfig manifest the job recorded: what its user-data renders.
    vmconfig: dict[str, str] = field(default_factory=dict)
