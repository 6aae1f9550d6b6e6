"""Finding a VM of a job (the job by id or environment name: `listings.find_job`), and running a
command on it or opening a session through the exec channel."""

from __future__ import annotations

from dataclasses import dataclass

from vmplane.clouds.base import CommandResult, SessionHint
from vmplane.clouds.registry import driver_for
from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError
from vmplane.jobs import service as jobs
from vmplane.jobs.listings import find_job
from vmplane.jobs.poolstate import stopped_reason
from vmplane.jobs.service import JobConflictError, JobStatus, JobView
from vmplane.settings import Settings
from vmplane.store.db import transaction


def current_job_for(settings: Settings, spec: EnvSpec, sandbox: bool | None = None) -> JobView | None:
    """The file's current job on a real cloud (`sandbox=False`) or on the sandbox (`True`). `None`: the
    only one; with one on each, which one is ambiguous (a usage error naming both)."""
    with transaction(settings.db_url) as s:
        if sandbox is not None:
            row = jobs.find_current_job(s, spec.org, spec.name, sandbox)
            return jobs.view(row) if row is not None else None
        rows = jobs.live_jobs(s, spec.org, spec.name)
        if len(rows) > 1:
            ids = ", ".join(f"{r.id} ({'sandbox' if jobs.on_sandbox(r) else 'real'})" for r in rows)
            raise UsageError(
                f"{spec.org}/{spec.name} has a job on a real cloud and one on the sandbox ({ids}); "
                "pass --sandbox or --real, or give the job id"
            )
        return jobs.view(rows[0]) if rows else None


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
            # A stopped VM never answers: say why now instead of timing out.
            if reason := stopped_reason(job, rec.Pool):
                raise JobConflictError(f"{rec.Name}: {reason}")
            return ExecTarget(job, rec.Name, rec.ID)
    names = ", ".join(v.Name for v in job.infra.VMs) or "none"
    raise jobs.JobNotFoundError(f"no VM {vm!r} in {job.env} (VMs: {names})")


def exec_command(target: ExecTarget, command: str, timeout: float) -> CommandResult:
    """Run one shell command through the job's IAM-gated exec channel (SSM on AWS); never SSH."""
    driver = driver_for(target.job.target)
    return driver.exec_channel.run([target.instance_id], [command], timeout)[0]


def session_hint(target: ExecTarget) -> SessionHint:
    """How a person opens an interactive session on the VM (the cloud's command, never a key of ours)."""
    spec = target.job.spec
    if not spec.exec_interactive:
        # GCP's sessions need TCP 22 from IAP; this environment was built without that rule.
        raise UsageError(
            f"interactive sessions are off for {spec.name} (exec.gcp.interactive: false, so no port 22 is open); "
            "run commands with `vmplane exec ENV VM -- COMMAND`, or set exec.gcp.interactive to true and apply"
        )
    return driver_for(target.job.target).exec_channel.session_hint(target.instance_id)
