"""Actions on a job behind a confirmation page: the same planners and `begin_*` calls as the API's PATCH
and DELETE (`api/actions.py`), then the workflow started after the commit.

The confirmation page carries the job's version; the POST passes it as the expected version, so an
action confirmed on a page that has since gone stale is refused rather than applied to a changed job.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from sqlalchemy.orm.exc import StaleDataError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmplane.api.actions import destroy, plan_vm_op
from vmplane.api.schemas import AttachLb, DetachLb, Repair, Rotate, Scale, Start, Stop
from vmplane.dashboard.common import Dashboard, PageError, Who
from vmplane.dashboard.views import ACTION_TITLES, ACTIONS, ON_DEMAND, allowed_actions, can_take_operation
from vmplane.envspec.jsonc import JsoncSyntaxError, parse_jsonc
from vmplane.envspec.models import AsgPool, LoadBalancer
from vmplane.errors import VmplaneError
from vmplane.jobs import operations
from vmplane.jobs.service import JobView, Phase
from vmplane.jobs.tokens import Role
from vmplane.observe import logs
from vmplane.pipeline.plan import Plan

log = logs.get(__name__)


class ActionInputError(ValueError):
    """The confirmation form's fields do not make a valid request."""


def _role_for(action: str) -> Role:
    return Role.admin if action == "destroy" else Role.operator


def last_lb_block(job: JobView) -> str:
    """The job's load balancer block (or the one remembered at detach), as JSON to edit; "" if none."""
    block = job.config["spec"].get("loadBalancer") or job.config.get("detachedLoadBalancer")
    return json.dumps(block, indent=2) if block else ""


def _int(form: FormData, name: str) -> int | None:
    raw = str(form.get(name) or "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ActionInputError(f"{name} must be a whole number, not {raw!r}") from None


def _pool(form: FormData) -> str | None:
    return str(form.get("pool") or "").strip() or None


def body_for(action: str, form: FormData) -> DetachLb | AttachLb | Scale | Rotate | Stop | Start | Repair:
    """The API's vmOp body for an action and its confirmation form."""
    try:
        if action == "repair":
            return Repair.model_validate({"vmOp": "repair"})
        if action == "detach-lb":
            return DetachLb.model_validate({"vmOp": "detach_lb"})
        if action == "attach-lb":
            text = str(form.get("load_balancer") or "").strip()
            lb = LoadBalancer.model_validate(parse_jsonc(text)[0]) if text else None
            return AttachLb(vm_op="attach_lb", load_balancer=lb)
        if action == "scale":
            pool = _pool(form)
            if pool is None:
                raise ActionInputError("choose a pool to scale")
            sizes = {"min": _int(form, "min"), "max": _int(form, "max"), "desired": _int(form, "desired")}
            return Scale.model_validate({"vmOp": "scale", "pool": pool, **sizes})
        kinds: dict[str, type[Rotate | Stop | Start]] = {"rotate": Rotate, "stop": Stop, "start": Start}
        return kinds[action].model_validate({"vmOp": action, "pool": _pool(form)})
    except JsoncSyntaxError as err:
        raise ActionInputError(f"load_balancer line {err.line}:{err.col}: {err.message}") from None
    except ValidationError as err:
        reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        raise ActionInputError(reasons) from None


def preview(dash: Dashboard, job: JobView, action: str) -> Plan | None:
    """What the action would do now, from the same planner the POST uses (None when it cannot tell yet,
    e.g. scale before its sizes are chosen, or attach with no block known yet). A repair's reads the
    cloud's drift now: the page shows what the repair will fix."""
    try:
        if action == "destroy":
            return operations.plan_destroy(dash.settings, job)
        if action == "scale":
            return None
        return plan_vm_op(job, body_for(action, FormData()))[0].plan
    except (VmplaneError, ActionInputError):
        return None


def offered(job: JobView, who: Who, action: str, plan: Plan | None) -> bool:
    """Whether the confirmation offers the action: a repair when its planner found something to repair now
    (its preview), the others when the job page lists them."""
    if action == "repair":
        return plan is not None and who.can(Role.operator) and can_take_operation(job)
    return action in allowed_actions(job, who.role)


def router(dash: Dashboard) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    def confirm_page(
        request: Request, who: Who, job: JobView, action: str, status: int = 200, error: str | None = None, **form: Any
    ) -> Response:
        pools = [
            {
                "name": name,
                "asg": isinstance(p, AsgPool),
                "min": getattr(p, "min", None),
                "max": getattr(p, "max", None),
                "desired": p.desired if isinstance(p, AsgPool) else p.size,
            }
            for name, p in job.spec.pools.items()
        ]
        plan = preview(dash, job, action)
        return dash.render(
            request,
            "confirm.html",
            who,
            status,
            job=job,
            action=action,
            title=ACTION_TITLES[action],
            plan=plan,
            offered=offered(job, who, action, plan),
            pools=pools,
            lb_text=form.get("lb_text", last_lb_block(job)),
            values=form.get("values", {}),
            error=error,
        )

    def parse(request: Request, job_id: str, action: str) -> tuple[Who, JobView]:
        if action not in ACTIONS and action not in ON_DEMAND:
            raise PageError(404, f"No action {action}.")
        who = dash.needs(request, _role_for(action))
        return who, dash.load(job_id, who)

    @r.get("/ui/jobs/{job_id}/actions/{action}")
    def confirm(request: Request, job_id: str, action: str) -> Response:
        who, job = parse(request, job_id, action)
        return confirm_page(request, who, job, action)

    @r.post("/ui/jobs/{job_id}/actions/{action}")
    async def act(request: Request, job_id: str, action: str) -> Response:
        form = await request.form()  # its fields depend on the action, so it is read here, not declared
        return await run_in_threadpool(act_on, request, job_id, action, form)

    def act_on(request: Request, job_id: str, action: str, form: FormData) -> Response:
        who, job = parse(request, job_id, action)
        dash.check_csrf(request, who, str(form.get("csrf") or ""))
        version = _int(form, "version") if str(form.get("version") or "").isdigit() else None
        try:
            if action == "destroy":
                if destroy(dash.settings, job, version):  # created nothing: forgotten, no teardown to start
                    return RedirectResponse(f"/ui/jobs/{job.id}", status_code=303)
                phase = Phase.teardown
            else:
                op, _ = plan_vm_op(job, body_for(action, form), version)
                operations.begin_operation(dash.settings, op, version)
                phase = Phase.operation
        except (VmplaneError, ActionInputError, StaleDataError) as err:
            if isinstance(err, StaleDataError):
                message, status = "The job changed while this ran; review it again.", 409
            else:
                message = str(err)
                status = err.http_status if isinstance(err, VmplaneError) else 422
            values = {k: str(v) for k, v in form.items() if k in ("pool", "min", "max", "desired")}
            lb_text = str(form.get("load_balancer") or "")
            return confirm_page(request, who, job, action, status, message, lb_text=lb_text, values=values)
        log.info("dashboard action %s on job %s (org %s, %s)", action, job.id, who.org, who.role.value)
        dash.start(job.id, phase)
        return RedirectResponse(f"/ui/jobs/{job.id}", status_code=303)

    return r
