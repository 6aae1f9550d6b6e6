"""The small typed interface every cloud driver implements, and the context a step hands it.

A driver method reads the desired spec and the recorded InfraConfig, calls its SDK idempotently
(find-by-tag before create), and writes what it observed back into InfraConfig. It calls
`ctx.save()` before and after every create so a crash leaves a record to reconcile, never an orphan.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

MANAGED_BY = "vmplane"

# A per-step tally of cloud API calls ("service.Operation" -> count). The pipeline sets a fresh
# Counter around each step; drivers' SDK hooks increment it. Recorded on the step (for bench/).
API_CALLS: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar("vmplane_api_calls", default=None)


def vm_role_name(org: str, env: str) -> str:
    """IAM names are account-global: org + env keeps two orgs' "web" envs apart (IAM allows 64 chars)."""
    return f"vmplane-{org}-{env}-vm"[:64]


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
    notes: list[str] = field(default_factory=list)  # what the user must read (shown after an operation)


@dataclass(frozen=True)
class Leftover:
    """A resource still tagged with a job id (what a clean teardown must leave none of)."""

    kind: str
    id: str


@dataclass(frozen=True)
class CommandResult:
    """One command's outcome on one VM through the exec channel."""

    instance_id: str
    status: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == "Success" and self.exit_code == 0


class CloudDriver(Protocol):
    """One driver per cloud; each method is one step's cloud work and must be idempotent."""

    def preflight(self, ctx: Context) -> None: ...
    def ensure_network(self, ctx: Context) -> None: ...
    def ensure_identity(self, ctx: Context) -> None: ...
    def ensure_launch_templates(self, ctx: Context) -> None: ...
    def ensure_vms(self, ctx: Context) -> None: ...
    def ensure_load_balancer(self, ctx: Context) -> None: ...
    def ensure_target_group(self, ctx: Context) -> None: ...
    def ensure_listener(self, ctx: Context) -> None: ...
    def ensure_dns_record(self, ctx: Context) -> None: ...

    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None: ...
    def update_tags(self, ctx: Context) -> None: ...
    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        """Replace the pool's outdated VMs; returns notes for the user (e.g. what the endpoint lacks)."""
        ...

    def delete_vms(self, ctx: Context) -> None: ...
    def delete_launch_templates(self, ctx: Context) -> None: ...
    def delete_security_group(self, ctx: Context) -> None: ...
    def delete_identity(self, ctx: Context) -> None: ...
    def delete_network(self, ctx: Context) -> None: ...

    def leftovers(self, ctx: Context) -> list[Leftover]: ...

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]: ...
