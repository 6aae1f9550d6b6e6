"""Apply, destroy and resume as operations over the job service and the durable engine.

The CLI (and later the API) call these; they decide what a request means for the environment's
current job, start or re-attach to its workflow after the decision is committed, and wait.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vmplane.clouds.base import CommandResult
from vmplane.clouds.registry import driver_for
from vmplane.envspec.impact import CONSEQUENCE, Change, Impact, diff
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool, LoadBalancer
from vmplane.errors import UsageError
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobConflictError, JobStatus, JobView, OperationRecord, Phase
from vmplane.pipeline.plan import (
    LB_STEPS,
    TEARDOWN_STEPS,
    Plan,
    PlanKind,
    provision_plan,
    provision_steps,
    teardown_plan,
)
from vmplane.settings import Settings
from vmplane.state import InfraConfig
from vmplane.store.db import transaction
from vmplane.target import Target

ACTIVE_WORKFLOW = {"PENDING", "ENQUEUED"}


class Decision(StrEnum):
    new = "new"  # no job yet: create one
    resume = "resume"  # an unfinished or failed job for the same file: continue it
    retry_with_changes = "retry_with_changes"  # a failed job, corrected file: re-run every step
    no_changes = "no_changes"  # applied and identical
    update = "update"  # applied and different, every change can be made in place: an `update` operation
    refused = "refused"  # applied and different, and some change cannot be made in place


@dataclass
class ApplyPlan:
    decision: Decision
    plan: Plan
    job: JobView | None
    changes: list[Change] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "decision": self.decision.value,
            "job": self.job.id if self.job else None,
            "changes": [{**c.to_json(), "consequence": CONSEQUENCE[c.impact]} for c in self.changes],
            "refusals": self.refusals,
        }


def plan_apply(settings: Settings, spec: EnvSpec, target: Target) -> ApplyPlan:
    with transaction(settings.db_url) as s:
        row = jobs.find_current_job(s, spec.org, spec.name)
        job = jobs.view(row) if row is not None else None
    fresh = provision_plan(driver_for(target), spec, InfraConfig(), target.describe())
    if job is None:
        return ApplyPlan(Decision.new, fresh, None)
    same = job.config["spec"] == jobs.spec_json(spec)
    if job.status in (JobStatus.deleting, JobStatus.delete_failed):
        raise JobConflictError(
            f"environment {spec.name} is being destroyed by {job.id} ({job.status}); finish that first"
        )
    failed_op = job.operation if job.status is JobStatus.failed and job.operation is not None else None
    if failed_op is not None and same:
        raise JobConflictError(
            f"the last operation on {job.env} ({failed_op.kind}) failed: {failed_op.error}; "
            f"`vmplane resume {job.id}` retries it, or apply a corrected file"
        )
    if job.status is JobStatus.succeeded or failed_op is not None:
        if same:
            return ApplyPlan(Decision.no_changes, Plan(PlanKind.none, spec.name, target.describe(), []), job)
        return plan_update(spec, target, job)
    if job.target != target:
        raise JobConflictError(f"job {job.id} runs on {job.target.describe()}, not {target.describe()}")
    remaining = [s.name for s in job.steps if s.status != jobs.StepStatus.succeeded]
    fresh.notes.insert(0, f"continues job {job.id} ({job.status}) at {remaining[0] if remaining else 'its end'}")
    if job.status is JobStatus.failed and not same:
        return ApplyPlan(Decision.retry_with_changes, fresh, job)
    return ApplyPlan(Decision.resume, fresh, job)


def plan_update(spec: EnvSpec, target: Target, job: JobView) -> ApplyPlan:
    """An applied environment and a changed file: every change classified by its impact."""
    changes = diff(job.config["spec"], jobs.spec_json(spec))
    refusals: list[str] = []
    for c in changes:
        if c.impact is Impact.identity:
            refusals.append(f"{c.path}: {CONSEQUENCE[c.impact]}")
        elif c.path == "loadBalancer":
            verb = "attach" if c.new is not None else "detach"
            refusals.append(f"loadBalancer: use `vmplane lb {verb} {spec.name}` to {verb} the load balancer")
        elif c.path.startswith("pools.") and c.path.count(".") == 1 and c.new is None:
            refusals.append(f"{c.path}: removing a pool in place is not supported; set its size to 0 or destroy")
    if job.target != target:
        refusals.append(f"the job runs on {job.target.describe()}, not {target.describe()}")
    if changes and all(c.impact is Impact.runtime for c in changes):
        steps = ["stepPushRuntime", "stepRegisterSpace"]  # nothing else to reconcile
    else:
        steps = provision_steps(spec)  # stepFinalize pushes runtime changes among the others
    if any(c.path == "tags" or c.path.startswith("tags.") for c in changes):
        steps.insert(steps.index("stepRegisterSpace"), "stepUpdateTags")
    counts = Counter(c.impact.value for c in changes)
    headline = "Update: " + ", ".join(f"{n} {impact}" for impact, n in sorted(counts.items())) + " change(s)."
    plan = Plan(PlanKind.update, spec.name, target.describe(), steps, [], notes=[], headline=headline)
    plan.notes.append(f"updates job {job.id}: every step reconciles the environment with the file")
    return ApplyPlan(Decision.refused if refusals else Decision.update, plan, job, changes, refusals)


def begin_update(
    settings: Settings, job: JobView, spec: EnvSpec, ap: ApplyPlan, expected_version: int | None = None
) -> OperationRecord:
    params = {"changes": [c.path for c in ap.changes]}
    with transaction(settings.db_url) as s:
        return jobs.begin_operation(
            s, job.id, "update", params, ap.plan.steps, spec=spec, expected_version=expected_version
        )


def create_or_update_job(settings: Settings, spec: EnvSpec, target: Target, ap: ApplyPlan) -> str:
    steps = provision_steps(spec)
    with transaction(settings.db_url) as s:
        if ap.decision is Decision.new:
            return jobs.create_job(s, spec, target, steps).id
        assert ap.job is not None
        if ap.decision is Decision.retry_with_changes:
            jobs.replace_spec(s, ap.job.id, spec, steps)
        return ap.job.id


def plan_destroy(settings: Settings, job: JobView) -> Plan:
    return teardown_plan(driver_for(job.target), job.spec, job.infra, job.target.describe())


def find_job(settings: Settings, ref: str) -> JobView:
    """A job by id, or the current job of an environment name."""
    with transaction(settings.db_url) as s:
        try:
            return jobs.view(jobs.get_row(s, ref))
        except jobs.JobNotFoundError:
            rows = [
                r for r in jobs.list_jobs(s, limit=1000) if r.env_name == ref and r.status != JobStatus.deleted.value
            ]
            if len(rows) > 1:
                raise JobConflictError(f"{ref} names environments of several orgs; use a job id") from None
            if not rows:
                raise
            return jobs.view(rows[0])


def current_job_for(settings: Settings, spec: EnvSpec) -> JobView | None:
    with transaction(settings.db_url) as s:
        row = jobs.find_current_job(s, spec.org, spec.name)
        return jobs.view(row) if row is not None else None


def resume_phase(job: JobView) -> Phase | None:
    """What `resume` continues: a teardown, an unfinished operation, or provisioning; None if nothing."""
    if job.status in (JobStatus.deleting, JobStatus.delete_failed):
        return Phase.teardown
    op = job.operation
    if job.status is not JobStatus.deleted and op is not None and op.status != "succeeded":
        return Phase.operation
    if job.status in (JobStatus.succeeded, JobStatus.deleted):
        return None
    return Phase.provision


def begin_destroy(settings: Settings, job_id: str, expected_version: int | None = None) -> None:
    with transaction(settings.db_url) as s:
        jobs.begin_teardown(s, job_id, list(TEARDOWN_STEPS), expected_version)


Progress = Callable[[JobView], None]


def workflow_kind(job: JobView, phase: Phase) -> str:
    """The attempt counter's key: one per phase, and one per operation."""
    if phase is Phase.operation:
        assert job.operation is not None
        return job.operation.id
    return phase.value


def _workflow_for(
    settings: Settings, job_id: str, phase: Phase, status_of: Callable[[str], str | None]
) -> tuple[str, bool]:
    """The job's workflow id for `phase`: the current one while it is queued or running (True), else a
    new attempt, recorded (False): nothing is in flight (new, failed, or interrupted under another
    vmplane version)."""
    from vmplane.pipeline import engine

    with transaction(settings.db_url) as s:
        row = jobs.get_row(s, job_id)
        kind = workflow_kind(jobs.view(row), phase)
        attempt = jobs.current_attempt(row, kind)
    if attempt and status_of(engine.workflow_id(job_id, kind, attempt)) in ACTIVE_WORKFLOW:
        return engine.workflow_id(job_id, kind, attempt), True
    with transaction(settings.db_url) as s:
        attempt = jobs.next_workflow_attempt(s, job_id, kind)
    return engine.workflow_id(job_id, kind, attempt), False


def start(settings: Settings, job_id: str, phase: Phase) -> tuple[Any, str]:
    """Start (or re-attach to) the job's workflow for `phase` in this process; returns (handle, id)."""
    from vmplane.pipeline import engine

    engine.launch(settings)
    wid, _ = _workflow_for(settings, job_id, phase, engine.status_of)
    return engine.start(job_id, phase.value, wid), wid


def enqueue(settings: Settings, job_id: str, phase: Phase) -> str:
    """Hand the job's workflow to the workers (DBOS queue) without running it here; returns its id."""
    from vmplane.pipeline import engine

    wid, active = _workflow_for(settings, job_id, phase, lambda w: engine.client_status(settings, w))
    if not active:
        engine.enqueue(settings, job_id, phase.value, wid)
    return wid


def run(
    settings: Settings, job_id: str, *, phase: Phase, on_progress: Progress | None = None, poll_interval: float = 0.1
) -> JobView:
    """Run (or re-attach to) the job's workflow for `phase` in this process and wait for it to end."""
    from vmplane.pipeline import engine

    handle, wid = start(settings, job_id, phase)
    last_version = -1
    while True:
        done = engine.status_of(wid) not in ACTIVE_WORKFLOW
        with transaction(settings.db_url) as s:
            job = jobs.view(jobs.get_row(s, job_id))
        if on_progress and job.version != last_version:
            last_version = job.version
            on_progress(job)
        if done:
            handle.get_result()
            break
        time.sleep(poll_interval)
    with transaction(settings.db_url) as s:
        return jobs.view(jobs.get_row(s, job_id))


def finish_recovered() -> list[str]:
    """Let workflows recovered at launch (interrupted by an earlier crash) run to their end."""
    from dbos import DBOS

    from vmplane.pipeline import engine

    others = engine.other_active_workflows()
    for wid in others:
        DBOS.retrieve_workflow(wid).get_result()
    return others


@dataclass
class ExecTarget:
    job: JobView
    vm_name: str
    instance_id: str


def exec_target(settings: Settings, ref: str, vm: str) -> ExecTarget:
    """The VM (by name or instance id) of a provisioned environment, for the exec channel."""
    job = find_job(settings, ref)
    if job.status is not JobStatus.succeeded:
        raise JobConflictError(f"job {job.id} is {job.status.value}; exec needs a provisioned environment")
    for rec in job.infra.VMs:
        if vm in (rec.Name, rec.ID) and rec.ID:
            return ExecTarget(job, rec.Name, rec.ID)
    names = ", ".join(v.Name for v in job.infra.VMs) or "none"
    raise jobs.JobNotFoundError(f"no VM {vm!r} in {job.env} (VMs: {names})")


def exec_command(target: ExecTarget, command: str, timeout: float) -> CommandResult:
    """Run one shell command through the job's IAM-gated exec channel (SSM on AWS); never SSH."""
    from vmplane.clouds.registry import driver_for

    driver = driver_for(target.job.target)
    return driver.run_command([target.instance_id], [command], timeout)[0]


# ---- operations on a provisioned job (vmOp) --------------------------------------------------------


class OperationError(UsageError):
    """An operation's arguments do not fit the environment (exit code 2, HTTP 422)."""


@dataclass
class OperationPlan:
    kind: str
    job: JobView
    params: dict[str, Any]
    steps: list[str]
    plan: Plan
    spec: EnvSpec | None = None
    config_updates: dict[str, Any] = field(default_factory=dict)


def _require_provisioned(job: JobView) -> None:
    if job.status in (JobStatus.pending, JobStatus.running, JobStatus.deleting):
        raise JobConflictError(f"job {job.id} is {job.status.value}; wait for it to finish (or resume it) first")
    if job.status in (JobStatus.deleted, JobStatus.delete_failed):
        raise JobConflictError(f"job {job.id} is {job.status.value}; there is no environment to change")


def plan_attach_lb(job: JobView, lb: LoadBalancer | None) -> OperationPlan:
    _require_provisioned(job)
    if job.infra.LoadBalancerID and job.spec.load_balancer is not None:
        raise JobConflictError(f"{job.env} already has a load balancer ({job.infra.LoadBalancerDNSName})")
    block = lb or job.spec.load_balancer
    if block is None and job.config.get("detachedLoadBalancer"):
        block = LoadBalancer.model_validate(job.config["detachedLoadBalancer"])
    if block is None:
        raise OperationError(f"{job.env} has no loadBalancer block to attach: pass -f FILE with one")
    driver = driver_for(job.target)
    if not driver.capabilities.load_balancers:
        raise OperationError(f"{job.target.cloud.value} has no load balancer vmplane can create")
    spec = job.spec.model_copy(update={"load_balancer": block})
    steps = [*LB_STEPS, "stepRegisterSpace"]
    plan = Plan(PlanKind.attach_lb, job.env, job.target.describe(), steps, driver.lb_resources(spec))
    return OperationPlan("attach_lb", job, {"domain": block.domain}, steps, plan, spec=spec)


def plan_detach_lb(job: JobView) -> OperationPlan:
    _require_provisioned(job)
    if job.spec.load_balancer is None and not job.infra.LoadBalancerID:
        raise JobConflictError(f"{job.env} has no load balancer attached")
    spec = job.spec.model_copy(update={"load_balancer": None})
    steps = ["stepDetachLoadBalancer", "stepRegisterSpace"]
    resources = driver_for(job.target).lb_teardown_resources(job.infra)
    plan = Plan(PlanKind.detach_lb, job.env, job.target.describe(), steps, resources)
    plan.notes.append("the VMs keep running; their ingress goes back to what it was before the load balancer")
    updates = {"detachedLoadBalancer": jobs.spec_json(job.spec)["loadBalancer"]} if job.spec.load_balancer else {}
    return OperationPlan("detach_lb", job, {}, steps, plan, spec=spec, config_updates=updates)


def plan_scale(
    job: JobView, pool: str, *, min_size: int | None, max_size: int | None, desired: int | None
) -> OperationPlan:
    _require_provisioned(job)
    current = job.spec.pools.get(pool)
    if current is None:
        raise OperationError(f"no pool {pool!r} in {job.env} (pools: {', '.join(job.spec.pools)})")
    if min_size is None and max_size is None and desired is None:
        raise OperationError("give at least one of --min, --max, --desired")
    if isinstance(current, FixedPool):
        if min_size is not None or max_size is not None:
            raise OperationError(f"pool {pool} is fixed: only --desired (its size) applies")
        assert desired is not None
        new_pool: FixedPool | AsgPool = _revalidate(current, {"size": desired}, pool)
        detail = f"size {current.size} -> {desired}"
    else:
        sizes = {"min": min_size, "max": max_size, "desired": desired}
        new_pool = _revalidate(current, {k: v for k, v in sizes.items() if v is not None}, pool)
        assert isinstance(new_pool, AsgPool)
        before, after = (current.min, current.desired, current.max), (new_pool.min, new_pool.desired, new_pool.max)
        detail = "min/desired/max {}/{}/{} -> {}/{}/{}".format(*before, *after)
    spec = job.spec.model_copy(update={"pools": {**job.spec.pools, pool: new_pool}})
    steps = ["stepScalePool", "stepRegisterSpace"]
    plan = Plan(PlanKind.scale, job.env, job.target.describe(), steps, [], headline=f"Scale: pool {pool} {detail}.")
    plan.notes.append("running VMs stay")
    return OperationPlan(
        "scale", job, {"pool": pool, "min": min_size, "max": max_size, "desired": desired}, steps, plan, spec=spec
    )


def _revalidate(pool: FixedPool | AsgPool, updates: dict[str, int], name: str) -> FixedPool | AsgPool:
    from pydantic import ValidationError

    try:
        return type(pool).model_validate({**pool.model_dump(), **updates})
    except ValidationError as err:
        reasons = "; ".join(e["msg"] for e in err.errors())
        raise OperationError(f"pools.{name}: {reasons}") from None


def plan_rotate(job: JobView, pool: str | None) -> OperationPlan:
    _require_provisioned(job)
    if pool is not None and pool not in job.spec.pools:
        raise OperationError(f"no pool {pool!r} in {job.env} (pools: {', '.join(job.spec.pools)})")
    outdated = [v for v in job.infra.outdated_vms() if pool is None or v.Pool == pool]
    steps = ["stepRotateVMs", "stepRegisterSpace"]
    plan = Plan(PlanKind.rotate, job.env, job.target.describe(), steps, [])
    for v in outdated:
        how = "rolling replacement by the cloud" if isinstance(job.spec.pools[v.Pool], AsgPool) else "one at a time"
        plan.notes.append(
            f"{v.Name} ({v.ID}) v{v.LaunchTemplateVersion} -> v{job.infra.LaunchTemplateVersion[v.Pool]} ({how})"
        )
    plan.headline = f"Rotate: {len(outdated)} VMs to replace."
    if not outdated:
        plan.notes.append("every VM runs its pool's current launch template version: nothing to replace")
    return OperationPlan("rotate", job, {"pool": pool} if pool else {}, steps, plan)


def begin_operation(settings: Settings, op: OperationPlan, expected_version: int | None = None) -> OperationRecord:
    with transaction(settings.db_url) as s:
        return jobs.begin_operation(
            s,
            op.job.id,
            op.kind,
            op.params,
            op.steps,
            spec=op.spec,
            config_updates=op.config_updates,
            expected_version=expected_version,
        )
