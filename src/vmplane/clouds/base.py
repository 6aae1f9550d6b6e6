"""The driver base class every cloud implements, its capabilities, and the context a step hands it.

A driver method reads the desired spec and the recorded InfraConfig, calls its SDK idempotently
(find-by-tag before create), and writes what it observed back into InfraConfig. It calls
`ctx.save()` before and after every create so a crash leaves a record to reconcile, never an orphan.
"""

from __future__ import annotations

import abc
import contextvars
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from vmplane.bootstrap.cloudinit import check_user_data_size, render_user_data
from vmplane.bootstrap.runtime import render_push_script
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import (
    ConflictError,
    DeadlineExceededError,
    InvalidRequestError,
    NotFoundError,
    QuotaError,
    UnsupportedError,
)
from vmplane.clouds.secret_access import SecretAccess, SecretProblemsError
from vmplane.clouds.steps import DEFAULT_DEPENDS
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode
from vmplane.state import InfraConfig, VMRecord, VMState

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


def bootstrap_timed_out(
    ctx: Context, vms: list[VMRecord], timeout: float, reasons: dict[str, str] | None = None
) -> DeadlineExceededError:
    """Mark the VMs still bootstrapping as failed (saved) and say where to look; the caller raises it.
    `reasons`: per VM name, the bootstrap log's failure lines the last sentinel check printed (e.g. the
    artifact that was unpinned or failed its checksum)."""
    late = [v.Name for v in vms if v.State is VMState.bootstrap]
    logged = reasons or {}
    why = "; ".join(f"{name}: {' / '.join(logged[name].splitlines())}" for name in late if logged.get(name))
    for v in vms:
        if v.State is VMState.bootstrap:
            v.State = VMState.failed
    ctx.save()
    return DeadlineExceededError(
        f"bootstrap sentinel not seen within {timeout}s on {', '.join(late)}; "
        + (f"the bootstrap logged: {why}; " if why else "")
        + "see /var/log/vmplane-bootstrap.log on the VM (vmplane exec)"
    )


@dataclass(frozen=True)
class Leftover:
    """A resource still tagged with a job id (what a clean teardown must leave none of)."""

    kind: str
    id: str


class CommandStatus(StrEnum):
    """A command's outcome in neutral words; each driver maps its channel's statuses onto these."""

    success = "Success"
    failed = "Failed"
    timed_out = "TimedOut"
    cancelled = "Cancelled"
    undeliverable = "Undeliverable"  # the channel could not reach the VM (agent down, no permission)


@dataclass(frozen=True)
class CommandResult:
    """One command's outcome on one VM through the exec channel."""

    instance_id: str
    status: CommandStatus
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status is CommandStatus.success and self.exit_code == 0


class Action(StrEnum):
    """What a plan does to one resource (Terraform's symbols)."""

    create = "+"
    update = "~"
    destroy = "-"
    recreate = "-/+"  # destroy, then create a replacement


@dataclass(frozen=True)
class PlannedResource:
    action: Action
    type: str
    name: str
    step: str
    detail: str = ""


@dataclass(frozen=True)
class TagRules:
    """How a cloud stores vmplane's tag set: `key_value` (AWS tags, GCP labels) or `tokens` (Proxmox)."""

    style: str  # "key_value" | "tokens"
    key_pattern: str  # what an encoded key (or token) must match
    max_key: int
    max_value: int


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do; stepValidate refuses a spec that asks for more, before anything is created."""

    pool_modes: frozenset[str]  # "fixed", "asg"
    load_balancers: bool
    cert_sources: frozenset[CertSource]
    instance_refresh: bool  # a rolling replacement of a scaling group by the cloud itself
    exec_modes: frozenset[ExecMode]
    exec_payload_bytes: int  # the largest script one exec-channel command can carry
    user_data_bytes: int  # the largest bootstrap (cloud-init user-data) a VM can be given
    tags: TagRules
    schedules: bool = False  # runs a pool's `schedule` on the cloud's own scheduler
    drift: bool = False  # reads its resources back and repairs them (`drift`, `repair_drift`)


class CloudDriver(abc.ABC):
    """One driver per cloud. Each method is one step's cloud work and must be idempotent: find by tag
    (or by a name the driver derives from the job) before every create, record intent before acting.

    Optional operations raise `UnsupportedError` here; a driver that cannot do one also says so in
    `capabilities`, which stepValidate and the operation planners check first.
    """

    cloud: ClassVar[Cloud]
    capabilities: ClassVar[Capabilities]

    # ---- provisioning ----
    def validate(self, spec: EnvSpec) -> list[str]:
        """What `spec` asks that this driver cannot do, each naming the field (stepValidate, before
        any cloud call; `vmplane validate` runs the same through `registry.static_problems`)."""
        return capability_problems(spec, self.capabilities, self.cloud)

    @abc.abstractmethod
    def preflight(self, ctx: Context) -> None:
        """stepValidate: check what the cloud must allow (images, quotas, name conflicts); create nothing."""

    def precheck(self, spec: EnvSpec, job_id: str, infra: InfraConfig | None = None) -> list[str]:
        """`preflight` before any job exists, so a request bound to fail records nothing: run on a throwaway
        Context (a copy of `infra`, or a fresh one; `save` does nothing), it only reads the cloud. Returns
        what the cloud refuses, each naming its field (the first one preflight meets). A failure to reach
        or authenticate to the cloud is not a refusal of the file: it raises its CloudError."""
        scratch = infra.model_copy(deep=True) if infra is not None else InfraConfig()
        ctx = Context(job_id=job_id, spec=spec, infra=scratch, tagger=Tagger.for_spec(spec, job_id))
        try:
            self.preflight(ctx)
        except SecretProblemsError as err:
            return err.problems  # each unreadable secret is its own problem, placed at its field
        except (InvalidRequestError, ConflictError, NotFoundError, QuotaError) as err:
            return [str(err)]
        return []

    @abc.abstractmethod
    def ensure_network(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def ensure_identity(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def ensure_launch_templates(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def ensure_vms(self, ctx: Context) -> None: ...

    def ensure_load_balancer(self, ctx: Context) -> None:
        raise self.unsupported("load balancers")

    def ensure_target_group(self, ctx: Context) -> None:
        raise self.unsupported("load balancers")

    def ensure_listener(self, ctx: Context) -> None:
        raise self.unsupported("load balancers")

    def ensure_dns_record(self, ctx: Context) -> None:
        raise self.unsupported("load balancers")

    # ---- operations on a provisioned environment ----
    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None:
        """Remove the LB and what only it needs; a driver without LBs has nothing to remove."""
        if self.capabilities.load_balancers:
            raise self.unsupported("detaching a load balancer")

    @abc.abstractmethod
    def update_tags(self, ctx: Context) -> None:
        """Re-tag every resource of the job with the spec's current tag set."""

    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        """Replace the pool's outdated VMs; returns notes for the user (e.g. what the endpoint lacks)."""
        raise self.unsupported("rotating VMs")

    # ---- schedules and stop/start (drivers with `capabilities.schedules`) ----
    def ensure_schedules(self, ctx: Context) -> None:
        """Make the cloud's own schedulers match every pool's `schedule`: create, update in place, and
        remove those of pools that no longer have one. Runs after the VMs exist (stepCreateVMs, scale,
        rotate), because a schedule may name the pool's instances. A driver without schedules has none
        (stepValidate refused a scheduled pool)."""
        if self.capabilities.schedules:
            raise self.unsupported("schedules")

    def delete_schedules(self, ctx: Context) -> None:
        """Remove every schedule of the job (found in the cloud, not only in the record), before its VMs go."""
        if self.capabilities.schedules:
            raise self.unsupported("schedules")

    def stop_pool(self, ctx: Context, pool_name: str) -> None:
        """Stop the pool now: Fixed VMs stopped (State=stopped, disks kept), a scaling group sized to 0;
        the pool is added to `infra.StoppedPools`. Idempotent: a stopped pool is done."""
        raise self.unsupported("stopping a pool")

    def start_pool(self, ctx: Context, pool_name: str) -> None:
        """Start a stopped pool: Fixed VMs started and checked ready, a scaling group back to the spec's
        sizes and its VMs waited for; the pool leaves `infra.StoppedPools`. A running pool is done."""
        raise self.unsupported("starting a pool")

    # ---- teardown ----
    @abc.abstractmethod
    def delete_vms(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def delete_launch_templates(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def delete_security_group(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def delete_identity(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def delete_network(self, ctx: Context) -> None: ...

    @abc.abstractmethod
    def leftovers(self, ctx: Context) -> list[Leftover]:
        """Everything still tagged with the job (a clean teardown leaves none)."""

    # ---- drift (`clouds.drift`) ----
    def drift(self, ctx: Context) -> list[Drift]:
        """How the cloud differs from `ctx.spec` and `ctx.infra`: read-only, no `save`."""
        raise self.unsupported("drift detection")

    def repair_drift(self, ctx: Context) -> None:
        """stepRepairDrift: read the drift again and make the cloud match (extras deleted, rules and tags
        set back, stopped VMs started); what is missing is dropped from the record so the provisioning
        steps that follow create it again under its name. Idempotent; the user's resources are never changed."""
        raise self.unsupported("drift repair")

    # ---- exec channel ----
    @abc.abstractmethod
    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]: ...

    def session_hint(self, vm_id: str) -> SessionHint:
        """How a person opens an interactive session on a VM through the IAM-gated channel."""
        raise self.unsupported("interactive sessions")

    # ---- plans and records (pure: no cloud calls) ----
    @abc.abstractmethod
    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        """What applying `spec` creates, named as the steps name them (`infra` supplies what is already
        known, such as the zones)."""

    @abc.abstractmethod
    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        """What the load balancer steps create (also the plan of `vmplane lb attach`)."""

    @abc.abstractmethod
    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        """What destroying the recorded environment deletes, in teardown order."""

    @abc.abstractmethod
    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]: ...

    def step_dependencies(self) -> dict[str, list[str]]:
        """What each step needs before it starts (`clouds.steps`); steps whose inputs are met run side by side."""
        return {k: list(v) for k, v in DEFAULT_DEPENDS.items()}

    def early_steps(self) -> frozenset[str]:
        """Steps that start at once and call `ctx.wait_inputs()` themselves before they touch what the
        steps they need produce (their first part needs none of it)."""
        return frozenset()

    @abc.abstractmethod
    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        """The cloud-specific part of the inventory's outputs (stepRegisterSpace)."""

    def secret_access(self) -> SecretAccess:
        """The stores this cloud's VMs read their secrets from (clouds/secret_access.py)."""
        raise self.unsupported("secret references")

    def unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"{what}: not supported by the {self.cloud.value} driver", code="Unsupported")


@dataclass(frozen=True)
class SessionHint:
    argv: list[str]  # the command a person runs
    needs: str | None = None  # a program that must be on PATH for it (e.g. session-manager-plugin)


def capability_problems(spec: EnvSpec, caps: Capabilities, cloud: Cloud) -> list[str]:
    """What `spec` asks of a driver that it cannot do, each naming the field (empty: all supported)."""
    out = []
    for name, pool in spec.pools.items():
        if pool.mode not in caps.pool_modes:
            out.append(f"pools.{name}.mode: {pool.mode!r} pools are not supported on {cloud.value}")
        if pool.schedule is not None and not caps.schedules:
            out.append(
                f"pools.{name}.schedule: the {cloud.value} driver does not run schedules yet; nothing would stop "
                "the pool (`vmplane cost` prices the schedule)"
            )
    lb = spec.load_balancer
    if lb is not None:
        if not caps.load_balancers:
            out.append(f"loadBalancer: {cloud.value} has no load balancer vmplane can create")
        elif lb.cert_source not in caps.cert_sources:
            out.append(f"loadBalancer.certSource: {lb.cert_source.value} is not available on {cloud.value}")
    if spec.exec_mode not in caps.exec_modes:
        out.append(f"exec.mode: {spec.exec_mode.value} is not an exec channel of {cloud.value}")
    if problem := runtime_script_problem(spec, caps.exec_payload_bytes):
        out.append(problem)
    for name in spec.pools:
        try:
            check_user_data_size(render_user_data(spec, name), caps.user_data_bytes)
        except ValueError as err:
            out.append(f"pools.{name}: {err}")
    return out


def runtime_script_problem(spec: EnvSpec, limit: int) -> str | None:
    """Why the runtime settings cannot go through an exec channel carrying `limit` bytes, or None."""
    size = len(render_push_script(spec).encode())
    if size <= limit:
        return None
    return (
        f"runtime: the settings make a {size // 1024} KB script, more than the exec channel's {limit // 1024} KB; "
        "ship large files in the image or fetch them at boot"
    )
