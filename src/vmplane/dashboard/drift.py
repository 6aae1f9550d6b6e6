"""The job page's drift section: read on demand (`/ui/jobs/ID/drift`, a full page without JavaScript, the
section swapped in place by htmx with it), as `GET /provisioning-jobs/ID/drift` reads it; the "Repair"
action is the confirmation page of `actions.py`, which records the API's `repair` vmOp.

The job page itself never reads the cloud: it says only whether drift can be read now."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from vmplane.api.actions import read_drift
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import CloudError
from vmplane.clouds.registry import driver_for
from vmplane.dashboard.common import Dashboard
from vmplane.errors import VmplaneError
from vmplane.jobs.service import JobStatus, JobView
from vmplane.jobs.tokens import Role
from vmplane.observe import logs

log = logs.get(__name__)


@dataclass
class DriftView:
    """What the section shows: whether drift can be read now (and why not), and once read, each resource."""

    job_id: str
    reason: str = ""  # why drift cannot be read now; "" when it can
    checked: bool = False
    error: str = ""  # the read was refused or failed
    rows: list[dict[str, Any]] = field(default_factory=list)
    repairable: int = 0
    can_repair: bool = False  # the caller may start the repair now

    @property
    def checkable(self) -> bool:
        return not self.reason

    @property
    def reported(self) -> int:
        return len(self.rows) - self.repairable


def unread(job: JobView) -> DriftView:
    """The section before a read: offered when the job's cloud reads drift and the job is at rest."""
    try:
        reads = driver_for(job.target).capabilities.drift
    except VmplaneError:  # no driver for this target at all
        reads = False
    if not reads:
        return DriftView(job.id, f"The {job.target.cloud.value} driver does not read drift.")
    if job.status is not JobStatus.succeeded:
        return DriftView(
            job.id, f"Drift is read for a provisioned environment at rest; this job is {job.status.value}."
        )
    return DriftView(job.id)


def _row(d: Drift) -> dict[str, Any]:
    fields = [{"field": f.field, "wanted": _shown(f.wanted), "actual": _shown(f.actual)} for f in d.fields]
    # GCP's ids are the names already in the address: shown once (as `vmplane drift` does).
    same = d.id is None or d.resource.endswith(f".{d.id}")
    return {
        "resource": d.resource,
        "kind": d.kind,
        "id": "" if same else d.id,
        "change": d.change.value,
        "fields": fields,
        "repair": d.repair,
        "repairable": d.repairable,
    }


def _shown(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, sort_keys=True)


def read(job: JobView, role: Role) -> tuple[DriftView, int]:
    """The drift read now, and the HTTP status its answer has (the API's for the same refusal)."""
    view = unread(job)
    view.checked = True
    try:
        report = read_drift(job)
    except CloudError as err:
        log.warning("dashboard drift read of job %s failed: %s", job.id, err)
        view.error = f"The cloud could not be read: {err}"
        return view, 502
    except VmplaneError as err:  # a cloud that reads no drift (422), a job not at rest (409)
        view.error = str(err)
        return view, err.http_status
    view.rows = [_row(d) for d in report.drift]
    view.repairable = len(report.repairable)
    view.can_repair = bool(report.repairable) and role.allows(Role.operator)
    return view, 200


def router(dash: Dashboard) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.get("/ui/jobs/{job_id}/drift")
    def drift_page(request: Request, job_id: str) -> Response:
        who = dash.who(request)
        job = dash.load(job_id, who)
        view, status = read(job, who.role)
        # htmx swaps only a 2xx answer: the section it asked for carries the refusal itself.
        if request.headers.get("hx-request"):
            status = 200
        return dash.render(request, "drift.html", who, status, job=job, drift=view)

    return r
