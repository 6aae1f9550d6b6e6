"""Drift: the cloud read (never written) and compared with the job's record, for `vmplane drift`, the
refresh `plan` and `apply` run first, the API and the dashboard; and the `repair` operation that makes
the cloud match again (stepRepairDrift, then every provisioning step reconciles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.drift import Drift, counts
from vmplane.clouds.registry import driver_for
from vmplane.jobs.service import JobConflictError, JobStatus, JobView
from vmplane.jobs.vmops import OperationPlan
from vmplane.observe import metrics
from vmplane.pipeline.plan import Plan, PlanKind, provision_steps

REPAIR_STEP = "stepRepairDrift"


@dataclass(frozen=True)
class DriftReport:
    env: str
    job_id: str
    target: str
    drift: list[Drift]

    @property
    def repairable(self) -> list[Drift]:
        return [d for d in self.drift if d.repairable]

    def to_json(self) -> dict[str, Any]:
        return {"env": self.env, "job": self.job_id, "target": self.target, "drift": [d.to_json() for d in self.drift]}


def checkable(job: JobView) -> bool:
    """A provisioned job at rest on a cloud whose driver reads drift: its record says what the cloud should
    hold. A running job's record is half-written, a failed provision's incomplete (resume finishes it), a
    deleted job's empty."""
    return job.status is JobStatus.succeeded and driver_for(job.target).capabilities.drift


def check(job: JobView) -> DriftReport:
    """Read the cloud and list what differs from the job's spec and record (read-only: nothing is saved).
    A CloudError (the cloud cannot be read) propagates."""
    driver = driver_for(job.target)
    if not driver.capabilities.drift:
        raise driver.unsupported("drift detection")
    if not checkable(job):
        raise JobConflictError(
            f"{job.env} ({job.id}) is {job.status.value}: drift is read for a provisioned environment at rest"
        )
    ctx = Context(
        job_id=job.id,
        spec=job.spec,
        infra=job.infra.model_copy(deep=True),
        tagger=Tagger.for_spec(job.spec, job.id),
    )
    found = driver.inventory.drift(ctx)
    metrics.set_drift(counts(found))
    return DriftReport(job.env, job.id, job.target.describe(), found)


def with_repair(steps: list[str]) -> list[str]:
    """`steps` with the repair first after stepValidate (every later step reconciles from what it records)."""
    rest = [s for s in steps if s != REPAIR_STEP]
    at = 1 if rest and rest[0] == "stepValidate" else 0
    return [*rest[:at], REPAIR_STEP, *rest[at:]]


def repair_steps(job: JobView) -> list[str]:
    return with_repair(provision_steps(job.spec))


def plan_repair(job: JobView, report: DriftReport) -> OperationPlan:
    """The `repair` operation: what drifted, set back to the record's spec."""
    steps = repair_steps(job)
    plan = Plan(PlanKind.repair, job.env, job.target.describe(), steps, repairs=list(report.drift))
    n = len(report.repairable)
    plan.headline = f"Repair: {n} resource(s) drifted from the file." if n else "Drift found; none of it is vmplane's."
    plan.notes.append(f"repairs job {job.id}: stepRepairDrift, then every step reconciles the environment")
    reported = [d for d in report.drift if not d.repairable]
    if reported:
        plan.notes.append(f"{len(reported)} drifted resource(s) are reported only (not vmplane's): never changed")
    return OperationPlan("repair", job, {"drift": len(report.drift)}, steps, plan, spec=job.spec)
