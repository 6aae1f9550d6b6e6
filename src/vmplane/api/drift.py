"""`GET /provisioning-jobs/{id}/drift`: the cloud read (never written) and compared with the job's record,
answered with the same JSON as `vmplane drift -o json`. The repair is `PATCH` with `{"vmOp": "repair"}`."""

# No `from __future__ import annotations`: FastAPI reads the route's signature at runtime, and its
# dependency (`viewer`) is local to `router`.
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from vmplane.api import actions
from vmplane.api.common import JOBS, Caller, cloud_errors, domain_errors, errors
from vmplane.api.schemas import DriftReport
from vmplane.jobs.service import JobView

DESCRIPTION = (
    "Read the job's cloud (read-only: nothing is recorded) and list every resource that differs from the "
    "file as last applied and the job's record: `missing`, `changed` (each field's wanted and actual value) "
    "or `extra` (carrying the job's tags, not asked for). An empty `drift` list: none. The same JSON as "
    '`vmplane drift -o json`; `PATCH` with `{"vmOp": "repair"}` repairs it (the `ETag` is the job\'s '
    "version at the read, for its `If-Match`)."
)


def add_route(app: FastAPI, load: Callable[[str, Caller], JobView], viewer: Callable[..., Caller]) -> None:
    """The drift route, on the app itself (not an included router: the 405 handler lists the app's own
    routes); `load` finds a job of the caller's org (404 otherwise), `viewer` authenticates."""

    @app.get(
        JOBS + "/{job_id}/drift",
        tags=["jobs"],
        response_model=DriftReport,
        description=DESCRIPTION,
        responses=errors(
            404,
            409,
            422,
            502,
            e409="The job is not a provisioned environment at rest (running, failed or deleted): its record "
            "does not say what the cloud should hold.",
            e422="The job's cloud does not read drift (its driver has no drift detection).",
            e502="The cloud could not be read (unreachable, or it refused vmplane's credentials).",
        ),
    )
    def get_drift(job_id: str, who: Annotated[Caller, Depends(viewer)]) -> JSONResponse:
        job = load(job_id, who)
        with cloud_errors(), domain_errors():
            report = actions.read_drift(job)
        return JSONResponse(report.to_json(), headers={"ETag": f'"{job.version}"'})
