"""Forgetting a job that created nothing: its record ends `deleted` with no cloud call, so no credentials.

A job created nothing when no step after stepValidate ever started (stepValidate only reads the cloud)
and its InfraConfig records no resource nor the intent to make one (`InfraConfig.created_ids`): the
usual case is a job refused at stepValidate. Anything else must go through `destroy`, which finds and
deletes what the job made.
"""

from __future__ import annotations

from datetime import UTC, datetime

from vmplane.jobs import service as jobs
from vmplane.jobs.service import ACTIVE, JobConflictError, JobStatus, JobView, StepStatus
from vmplane.settings import Settings
from vmplane.store.db import transaction

# The steps that only read the cloud (CloudDriver.preflight's contract: create nothing).
READ_ONLY_STEPS = frozenset({"stepValidate"})


def holdings(job: JobView) -> list[str]:
    """What the job may hold in the cloud, each named (empty: it created nothing and can be forgotten)."""
    held = job.infra.created_ids()
    ran = [
        s.name
        for s in job.steps
        if s.name not in READ_ONLY_STEPS and (s.status not in (StepStatus.pending, StepStatus.skipped) or s.started_at)
    ]
    if ran:
        held.append(f"steps that create ran ({', '.join(ran)})")
    if job.operation is not None:
        held.append(f"operation {job.operation.kind} (the environment was provisioned)")
    return held


def forgettable(job: JobView) -> bool:
    """No workflow runs on it and it holds nothing: `forget` would succeed."""
    return job.status not in ACTIVE and job.status is not JobStatus.deleted and not holdings(job)


def forget(settings: Settings, job: JobView, expected_version: int | None = None) -> JobView:
    """Mark `job` deleted without a cloud call; refused (exit 2 / 409) naming what it holds otherwise."""
    if job.status is JobStatus.deleted:
        raise JobConflictError(f"job {job.id} is already deleted")
    if job.status in ACTIVE:
        raise JobConflictError(f"job {job.id} is {job.status.value}: its workflow may be running; wait or resume it")
    if held := holdings(job):
        raise JobConflictError(
            f"job {job.id} may hold cloud resources: {'; '.join(held)}; `vmplane destroy --job {job.id}` "
            "deletes them (it needs the cloud's credentials)"
        )
    with transaction(settings.db_url) as s:
        row = jobs.get_row(s, job.id, for_update=True)
        jobs.check_version(row, expected_version)
        # The error stays: it says why the job stopped. `forgottenAt` says no teardown ran.
        row.config = {**row.config, "forgottenAt": datetime.now(UTC).isoformat()}
        row.status = JobStatus.deleted.value
        jobs.touch(row)
        s.flush()
        return jobs.view(row)
