"""What the dashboard's pages show of a job, read from its record as `vmplane status` reads it (no cloud
call): the steps of the phase in progress, the VMs and the load balancer from `JobView.infra`, outdated
VMs, the operation history, the cost estimate, and which actions the planners would accept now."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vmplane.api.actions import VmOp, plan_vm_op
from vmplane.api.schemas import AttachLb, DetachLb, Rotate, Start, Stop
from vmplane.dashboard.drift import DriftView, unread
from vmplane.dashboard.runtime_view import RuntimeRow, runtime_rows
from vmplane.errors import VmplaneError
from vmplane.jobs.poolstate import pool_states
from vmplane.jobs.service import ACTIVE, JobStatus, JobView, StepRecord
from vmplane.jobs.tokens import Role

# The actions the job page offers, in its order.
ACTIONS = ("detach-lb", "attach-lb", "scale", "rotate", "stop", "start", "destroy")
ACTION_TITLES = {
    "detach-lb": "Detach the load balancer",
    "attach-lb": "Attach a load balancer",
    "scale": "Scale a pool",
    "rotate": "Replace outdated VMs",
    "stop": "Stop the pools",
    "start": "Start the pools",
    "destroy": "Destroy the environment",
    "repair": "Repair the drift",
}
# Actions offered elsewhere than the Actions list: the repair only after the drift section has read the cloud
# (the job page never reads it by itself).
ON_DEMAND = ("repair",)
# The vmOp body that asks each action's planner whether it applies now. Scale has none (its sizes come
# from its form, and a scale without sizes is refused on purpose), so it is offered whenever the job can
# take an operation; attach-lb is probed with a placeholder block, as its form takes the block.
PROBES: dict[str, VmOp] = {
    "detach-lb": DetachLb.model_validate({"vmOp": "detach_lb"}),
    "attach-lb": AttachLb.model_validate({"vmOp": "attach_lb", "loadBalancer": {"domain": "probe.example.com"}}),
    "rotate": Rotate.model_validate({"vmOp": "rotate"}),
    "stop": Stop.model_validate({"vmOp": "stop"}),
    "start": Start.model_validate({"vmOp": "start"}),
}
DESTROYABLE = {JobStatus.succeeded, JobStatus.failed, JobStatus.delete_failed}


@dataclass
class StepView:
    name: str
    status: str
    duration: str
    api_calls: int
    api_detail: str
    log: list[str]
    error: str | None


def step_view(step: StepRecord) -> StepView:
    duration = "-"
    if step.started_at and step.finished_at:
        duration = f"{(step.finished_at - step.started_at).total_seconds():.2f} s"
    elif step.started_at:
        duration = f"since {step.started_at:%H:%M:%S}"
    detail = ", ".join(f"{k} {v}" for k, v in sorted(step.api_calls.items()))
    return StepView(step.name, step.status.value, duration, sum(step.api_calls.values()), detail, step.log, step.error)


def main_steps(job: JobView) -> tuple[str, list[StepView]]:
    """The provisioning steps, or the teardown's once the job is being (or has been) destroyed."""
    if job.teardown_steps and job.status in (JobStatus.deleting, JobStatus.deleted, JobStatus.delete_failed):
        return "teardown", [step_view(s) for s in job.teardown_steps]
    return "provision", [step_view(s) for s in job.steps]


def age(created: datetime, now: datetime | None = None) -> str:
    at = created if created.tzinfo else created.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def can_take_operation(job: JobView) -> bool:
    """As `jobs.service.begin_operation` decides: provisioned, idle, and not a failed first provision."""
    if job.status in ACTIVE or job.status in (JobStatus.deleted, JobStatus.delete_failed):
        return False
    return not (job.status is JobStatus.failed and job.operation is None)


def allowed_actions(job: JobView, role: Role) -> list[str]:
    """The actions the caller may start on the job now: those its role allows and the planner accepts."""
    if not role.allows(Role.operator):
        return []
    out = []
    ops = can_take_operation(job)
    for action in ACTIONS:
        if action == "destroy":
            if role.allows(Role.admin) and job.status in DESTROYABLE:
                out.append(action)
        elif action == "scale":
            if ops:
                out.append(action)
        elif ops and _planner_accepts(job, action) and _changes_power(job, action):
            out.append(action)
    return out


def _changes_power(job: JobView, action: str) -> bool:
    """Stop is offered while a pool runs, start while one is stopped (the planners accept both as no-ops)."""
    if action not in ("stop", "start"):
        return True
    wanted = "running" if action == "stop" else "stopped"
    return any(state["state"] == wanted for state in _pools(job).values())


def _planner_accepts(job: JobView, action: str) -> bool:
    try:
        plan_vm_op(job, PROBES[action])
    except VmplaneError:
        return False
    return True


@dataclass
class JobPage:
    """Everything the job page renders, built once per request (and per SSE update)."""

    job: JobView
    phase: str
    steps: list[StepView]
    op_steps: list[StepView]
    vms: list[dict[str, Any]]
    outdated: list[dict[str, Any]]
    lb: dict[str, Any] | None
    history: list[dict[str, Any]]
    cost: dict[str, Any] | None
    pools: dict[str, dict[str, str | None]]
    drift: DriftView
    actions: list[str] = field(default_factory=list)
    runtime: list[RuntimeRow] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.job.status in ACTIVE


def job_page(job: JobView, role: Role) -> JobPage:
    infra = job.infra
    phase, steps = main_steps(job)
    op = job.operation
    current = {v.Pool: infra.LaunchTemplateVersion.get(v.Pool) for v in infra.VMs}
    vms = [
        {
            "name": v.Name,
            "pool": v.Pool,
            "id": v.ID or "-",
            "lifecycle": v.State.value,
            "ip": v.PrivateIP or "-",
            "zone": v.AZ or "-",
            "version": f"v{v.LaunchTemplateVersion}" if v.LaunchTemplateVersion else "-",
        }
        for v in infra.VMs
    ]
    outdated = [
        {"name": v.Name, "version": v.LaunchTemplateVersion, "current": current.get(v.Pool)}
        for v in infra.outdated_vms()
    ]
    lb = None
    if infra.LoadBalancerID or (job.spec.load_balancer is not None and job.status is not JobStatus.deleted):
        lb = {
            "domain": job.spec.load_balancer.domain if job.spec.load_balancer else None,
            "dns_name": infra.LoadBalancerDNSName or "pending",
            "id": infra.LoadBalancerID,
        }
    history = list(job.config.get("operationHistory", []))
    if op is not None:
        history.append(
            {"id": op.id, "kind": op.kind, "params": op.params, "status": op.status.value, "error": op.error}
        )
    return JobPage(
        job=job,
        phase=phase,
        steps=steps,
        op_steps=[step_view(s) for s in op.steps] if op else [],
        vms=vms,
        outdated=outdated,
        lb=lb,
        history=list(reversed(history)),
        cost=job.config.get("costEstimate"),
        pools=_pools(job),
        drift=unread(job),
        actions=allowed_actions(job, role),
        runtime=runtime_rows(job.spec),
    )


def _pools(job: JobView) -> dict[str, dict[str, str | None]]:
    try:
        return pool_states(job)
    except (KeyError, ValueError):  # an older record: no pool states rather than a broken page
        return {}
