"""`vmplane serve`: the provisioning API over the job service the CLI uses.

Every route is a thin adapter: authenticate, decide through `jobs/operations.py`, commit, then start the
durable workflow (after the commit, never inside it). This process runs the workflows it starts (DBOS is
launched here, and recovers this executor's interrupted workflows at start-up).

Errors: 401 no or bad token, 403 the role or org does not allow it, 404 no such job in the caller's org,
409 the job's state forbids it, 412 `If-Match` is stale, 422 the body is invalid or the change cannot
be made in place, 502 the cloud could not be read (drift, a repair, an update's refresh). No response or
log line contains a token or a cloud credential. The drift route is in `api/drift.py`.
"""

# No `from __future__ import annotations` here: FastAPI reads the route signatures at runtime, and the
# dependencies in them (`needs(Role.viewer)`) are local to create_app.
import hmac
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

import vmplane
from vmplane.api import actions, drift
from vmplane.api.common import JOBS as JOBS  # re-exported: the tests address the jobs path through the app
from vmplane.api.common import Caller, cloud_errors, domain_errors, errors, problem
from vmplane.api.schemas import (
    PatchBody,
    TokenRequest,
    Update,
    merge_patch,
)
from vmplane.clouds.errors import CloudError
from vmplane.envspec.impact import CONSEQUENCE
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.percloud import current_shape
from vmplane.jobs import operations, tokens
from vmplane.jobs import service as jobs
from vmplane.jobs.operations import Decision
from vmplane.jobs.service import (
    JobStatus,
    JobView,
    Phase,
)
from vmplane.jobs.tokens import Role
from vmplane.settings import Settings
from vmplane.store.db import transaction

# The job's version as `ETag` gives it ("7", or W/"7"); anything else is refused as invalid (422).
IfMatch = Annotated[
    str,  # absent: "" (a header has no null, so the schema offers none)
    Header(pattern=r'^(W/)?"?[0-9]+"?$', description='The job\'s version as its `ETag` gives it, e.g. "7".'),
]


def _etag(job: JobView) -> str:
    return f'"{job.version}"'


def _parse_if_match(value: str) -> int | None:
    """The version an `If-Match` names (`IfMatch` has checked its form), or None when it is absent."""
    return int(value.removeprefix("W/").strip('"')) if value else None


def _job_response(job: JobView, status: int = 200, **extra: Any) -> JSONResponse:
    body = {**job.to_json(), **extra} if extra else job.to_json()
    return JSONResponse(body, status_code=status, headers={"ETag": _etag(job)})


def create_app(settings: Settings, *, run_workflows: bool = True) -> FastAPI:
    """The API. With `run_workflows`, this process launches DBOS and runs the jobs it starts; without,
    it only enqueues them for `vmplane worker` processes and keeps no state of its own."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        if run_workflows:
            import asyncio

            from vmplane.pipeline import engine

            # DBOS's launch is synchronous (and refuses to register queues from an event loop).
            await asyncio.to_thread(engine.launch, settings)
        yield

    app = FastAPI(
        title="vmplane provisioning API",
        version=vmplane.__version__,
        description="Provisioning jobs for production-shape VM environments: create, read, patch (vmOp), delete.",
        lifespan=lifespan,
    )

    def start(job_id: str, phase: Phase) -> None:
        if run_workflows:
            operations.start(settings, job_id, phase)
        else:
            operations.enqueue(settings, job_id, phase)

    def caller(authorization: Annotated[str | None, Header()] = None) -> Caller:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(401, {"message": "a bearer token is required"}, {"WWW-Authenticate": "Bearer"})
        with transaction(settings.db_url) as s:
            row = tokens.verify(s, token.strip())
            if row is None:
                raise HTTPException(401, {"message": "invalid or revoked token"}, {"WWW-Authenticate": "Bearer"})
            return Caller(row.org, Role(row.role), row.id)

    def needs(role: Role) -> Callable[..., Caller]:
        def check(who: Annotated[Caller, Depends(caller)]) -> Caller:
            if not who.role.allows(role):
                raise problem(403, f"this needs the {role.value} role; the token has {who.role.value}")
            return who

        return check

    def load(job_id: str, who: Caller) -> JobView:
        with domain_errors(), transaction(settings.db_url) as s:
            job = jobs.view(jobs.get_row(s, job_id))
        if job.org != who.org:
            raise problem(404, f"no job {job_id}")  # another org's job does not exist for this caller
        return job

    drift.add_route(app, load, needs(Role.viewer))

    @app.get("/healthz", tags=["meta"], responses=errors(auth=False))
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": vmplane.__version__}

    # /metrics aggregates every org, so no org's token may read it: it answers only to the operator's own
    # bearer, VMPLANE_METRICS_TOKEN, and does not exist (404) when none is set. Not in the OpenAPI
    # document: it is for the scraper, not for API clients.
    metrics_token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    if metrics_token:
        from vmplane.pipeline import job_gauges

        job_gauges.install(settings)

    @app.get("/metrics", include_in_schema=False)
    def metrics(authorization: Annotated[str | None, Header()] = None) -> Response:
        from vmplane.observe import metrics as registry

        if not metrics_token:
            raise HTTPException(404, {"message": "Not Found"})
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), metrics_token.encode()):
            raise HTTPException(401, {"message": "the metrics token is required"}, {"WWW-Authenticate": "Bearer"})
        return Response(registry.exposition(), media_type=registry.CONTENT_TYPE)

    @app.post(
        JOBS,
        status_code=201,
        tags=["jobs"],
        responses=errors(409, 422, 502),
        description=(
            "Create an environment's provisioning job and start it. A spec that matches the schema can still "
            "be refused with 422, naming each field, when fields contradict each other (a pool's min above "
            "its desired or max, an existing VPC without its private subnets, the chosen cloud's own rules) "
            "or when the cloud would refuse it at stepValidate (an instance type not offered in the region's "
            "zones, an image that does not resolve, no DNS zone for the domain): JSON Schema cannot state "
            "those. Those cloud checks only read; 502 when the cloud cannot be asked. Nothing is recorded "
            "for either."
        ),
    )
    def create_job(
        spec: EnvSpec,
        request: Request,
        who: Annotated[Caller, Depends(needs(Role.operator))],
        sandbox: Annotated[
            bool,
            Query(description="Provision in the embedded sandbox (an emulated AWS account or Google Cloud project)."),
        ] = False,
    ) -> JSONResponse:
        if spec.org != who.org:
            raise problem(403, f"the token is for org {who.org}; the spec's org is {spec.org}")
        with domain_errors():
            try:
                job_id = actions.create(settings, spec, sandbox=sandbox)
            except CloudError as err:  # the precheck could not ask the cloud: the request is not at fault
                raise problem(502, f"the cloud could not be asked; nothing was recorded: {err}") from None
        start(job_id, Phase.provision)
        job = load(job_id, who)
        response = _job_response(job, 201)
        response.headers["Location"] = f"{JOBS}/{job_id}"
        return response

    @app.get(JOBS, tags=["jobs"], responses=errors(422))
    def list_jobs(
        who: Annotated[Caller, Depends(needs(Role.viewer))],
        status: Annotated[JobStatus | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
    ) -> dict[str, Any]:
        with transaction(settings.db_url) as s:
            rows = jobs.list_jobs(s, who.org, limit=limit + 1, offset=offset, status=status)
            items = [jobs.view(r).to_json() for r in rows[:limit]]
        more = len(rows) > limit
        query = f"limit={limit}&offset={offset + limit}" + (f"&status={status.value}" if status else "")
        return {"items": items, "next": f"{JOBS}?{query}" if more else None}

    @app.get(JOBS + "/{job_id}", tags=["jobs"], responses=errors(404))
    def get_job(job_id: str, who: Annotated[Caller, Depends(needs(Role.viewer))]) -> JSONResponse:
        return _job_response(load(job_id, who))

    @app.patch(
        JOBS + "/{job_id}",
        status_code=202,
        tags=["jobs"],
        responses={
            200: {"description": "An update with no changes: the job as it is."},
            **errors(404, 409, 412, 422, 502),
        },
        description=(
            "One typed `vmOp` per request. `repair` reads the cloud's drift (as `GET .../drift`) and records "
            "the operation that repairs it (409 when nothing drifted that vmplane may repair); `update` also "
            "reads it, and repairs it first. 502 when the cloud cannot be read; nothing is recorded then."
        ),
    )
    def patch_job(
        job_id: str,
        body: PatchBody,
        who: Annotated[Caller, Depends(needs(Role.operator))],
        if_match: IfMatch = "",
    ) -> JSONResponse:
        expected = _parse_if_match(if_match)
        job = load(job_id, who)
        with cloud_errors(), domain_errors(if_match=expected is not None):
            if isinstance(body, Update):
                return _update(job, body, expected, who)
            op, impact = actions.plan_vm_op(job, body, expected)
            record = operations.begin_operation(settings, op, expected)
        start(job.id, Phase.operation)
        return _job_response(load(job_id, who), 202, operation=record.dump(), impact=impact)

    def _update(job: JobView, body: Update, expected: int | None, who: Caller) -> JSONResponse:
        try:
            spec = EnvSpec.model_validate(merge_patch(current_shape(job.config["spec"]), body.spec))
        except ValidationError as err:
            raise HTTPException(422, [{**e, "loc": ["body", "spec", *e["loc"]]} for e in _plain(err)]) from None
        ap = operations.plan_update(spec, job.target, job)
        changes = [{**c.to_json(), "consequence": CONSEQUENCE[c.impact]} for c in ap.changes]
        if ap.decision is Decision.refused:
            raise problem(422, "some changes cannot be made in place", refusals=ap.refusals, impact=changes)
        if ap.decision is Decision.no_changes or not ap.changes:
            return _job_response(job, 200, impact=[])
        record = operations.begin_update(settings, job, spec, ap, expected)
        start(job.id, Phase.operation)
        return _job_response(load(job.id, who), 202, operation=record.dump(), impact=changes)

    @app.delete(
        JOBS + "/{job_id}",
        status_code=202,
        tags=["jobs"],
        responses={
            200: {"description": "The job created nothing in the cloud: it is `deleted` now, with no cloud call."},
            **errors(404, 409, 412),
        },
    )
    def delete_job(
        job_id: str,
        who: Annotated[Caller, Depends(needs(Role.admin))],
        if_match: IfMatch = "",
    ) -> JSONResponse:
        expected = _parse_if_match(if_match)
        job = load(job_id, who)
        with domain_errors(if_match=expected is not None):
            forgotten = actions.destroy(settings, job, expected)
        if forgotten:
            return _job_response(load(job_id, who), 200)
        start(job_id, Phase.teardown)
        return _job_response(load(job_id, who), 202)

    @app.post("/tokens", status_code=201, tags=["tokens"], responses=errors(422))
    def create_token(body: TokenRequest, who: Annotated[Caller, Depends(needs(Role.admin))]) -> dict[str, str]:
        """A new token for the caller's org; the token is in this response only (stored hashed)."""
        with transaction(settings.db_url) as s:
            token, row = tokens.create_token(s, who.org, body.role)
            return {"id": row.id, "org": row.org, "role": row.role, "token": token}

    @app.get("/tokens", tags=["tokens"], responses=errors())
    def list_tokens(who: Annotated[Caller, Depends(needs(Role.admin))]) -> dict[str, Any]:
        with transaction(settings.db_url) as s:
            rows = tokens.list_tokens(s, who.org)
            items = [
                {
                    "id": r.id,
                    "role": r.role,
                    "createdAt": r.created_at.isoformat(),
                    "revokedAt": r.revoked_at.isoformat() if r.revoked_at else None,
                }
                for r in rows
            ]
        return {"items": items}

    @app.delete("/tokens/{token_id}", status_code=204, tags=["tokens"], responses=errors(404))
    def revoke_token(token_id: str, who: Annotated[Caller, Depends(needs(Role.admin))]) -> Response:
        with transaction(settings.db_url) as s:
            if not tokens.revoke(s, token_id, who.org):
                raise problem(404, f"no live token {token_id}")
        return Response(status_code=204)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's HTTPException and the router's 404/405
    def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, dict | list) else {"message": str(exc.detail)}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # the router names only the first route's methods; a path has several
            headers["Allow"] = ", ".join(_allowed_methods(app, request.url.path))
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)

    return app


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    routes = [r for r in app.routes if isinstance(r, APIRoute) and r.path_regex.match(path)]
    return sorted({m for r in routes for m in r.methods or ()})


def _plain(err: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in err.errors()]
