"""Apply, destroy and resume as operations over the job service and the durable engine.

The CLI (and later the API) call these; they decide what a request means for the environment's
current job, start or re-attach to its workflow after the decision is committed, and wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from vmplane.clouds.base import CommandResult
from vmplane.clouds.registry import Target
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobConflictError, JobStatus, JobView
from vmplane.pipeline.plan import TEARDOWN_STEPS, Plan, provision_plan, provision_steps, teardown_plan
from vmplane.settings import Settings
from vmplane.spec.models import EnvSpec
from vmplane.store.db import transaction

ACTIVE_WORKFLOW = {"PENDING", "ENQUEUED"}


class Decision(StrEnum):
    new = "new"  # no job yet: create one
    resume = "resume"  # an unfinished or failed job for the same file: continue it
    retry_with_changes = "retry_with_changes"  # a failed job, corrected file: re-run every step
    no_changes = "no_changes"  # applied and identical
    changed = "changed"  # applied and different: change-impact planning decides (not yet)


@dataclass
class ApplyPlan:
    decision: Decision
    plan: Plan
    job: JobView | None


def plan_apply(settings: Settings, spec: EnvSpec, target: Target) -> ApplyPlan:
    with transaction(settings.db_url) as s:
        row = jobs.find_current_job(s, spec.org, spec.name)
        job = jobs.view(row) if row is not None else None
    fresh = provision_plan(spec, target.describe())
    if job is None:
        return ApplyPlan(Decision.new, fresh, None)
    same = job.config["spec"] == jobs.spec_json(spec)
    if job.status in (JobStatus.deleting, JobStatus.delete_failed):
        raise JobConflictError(
            f"environment {spec.name} is being destroyed by {job.id} ({job.status}); finish that first"
        )
    if job.status is JobStatus.succeeded:
        if same:
            return ApplyPlan(Decision.no_changes, Plan("none", spec.name, target.describe(), []), job)
        note = "this environment is applied and the file differs; updates in place arrive with change-impact planning"
        return ApplyPlan(Decision.changed, Plan("none", spec.name, target.describe(), [], notes=[note]), job)
    if job.target != target:
        raise JobConflictError(f"job {job.id} runs on {job.target.describe()}, not {target.describe()}")
    remaining = [s.name for s in job.steps if s.status != jobs.StepStatus.succeeded]
    fresh.notes.insert(0, f"continues job {job.id} ({job.status}) at {remaining[0] if remaining else 'its end'}")
    if job.status is JobStatus.failed and not same:
        return ApplyPlan(Decision.retry_with_changes, fresh, job)
    return ApplyPlan(Decision.resume, fresh, job)


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
    return teardown_plan(job.spec, job.infra, job.target.describe())


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


def begin_destroy(settings: Settings, job_id: str) -> None:
    with transaction(settings.db_url) as s:
        jobs.begin_teardown(s, job_id, list(TEARDOWN_STEPS))


Progress = Callable[[JobView], None]


def run(
    settings: Settings, job_id: str, *, teardown: bool, on_progress: Progress | None = None, poll_interval: float = 0.1
) -> JobView:
    """Run (or re-attach to) the job's workflow in this process and wait for it to end."""
    from vmplane.pipeline import engine

    engine.launch(settings)
    kind = "teardown" if teardown else "provision"
    with transaction(settings.db_url) as s:
        attempt = jobs.current_attempt(jobs.get_row(s, job_id), kind)
    wid = engine.workflow_id(job_id, kind, attempt)
    if attempt == 0 or engine.status_of(wid) not in ACTIVE_WORKFLOW:
        # Nothing in flight for this job (new, failed, or interrupted under another vmplane version).
        with transaction(settings.db_url) as s:
            attempt = jobs.next_workflow_attempt(s, job_id, kind)
        wid = engine.workflow_id(job_id, kind, attempt)
    handle = engine.start(job_id, teardown=teardown, attempt=attempt)
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
