"""Finding a job (by id or environment name) and a VM of it, and running a command on that VM."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from vmplane.clouds.base import CommandResult
from vmplane.clouds.registry import driver_for
from vmplane.envspec.models import EnvSpec
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobConflictError, JobStatus, JobView
from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.store.models import JobRow


def find_job(settings: Settings, ref: str) -> JobView:
    """A job by id, or the current (not deleted) job of an environment name."""
    with transaction(settings.db_url) as s:
        try:
            return jobs.view(jobs.get_row(s, ref))
        except jobs.JobNotFoundError:
            stmt = (
                select(JobRow)
                .where(JobRow.env_name == ref, JobRow.status != JobStatus.deleted.value)
                .order_by(JobRow.created_at.desc())
                .limit(2)
            )
            rows = list(s.scalars(stmt))
            if len(rows) > 1:
                raise JobConflictError(f"{ref} names environments of several orgs; use a job id") from None
            if not rows:
                raise
            return jobs.view(rows[0])


def current_job_for(settings: Settings, spec: EnvSpec) -> JobView | None:
    with transaction(settings.db_url) as s:
        row = jobs.find_current_job(s, spec.org, spec.name)
        return jobs.view(row) if row is not None else None


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
    driver = driver_for(target.job.target)
    return driver.run_command([target.instance_id], [command], timeout)[0]
