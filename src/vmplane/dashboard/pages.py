"""The dashboard's read pages: sign-in and sign-out, the jobs list, and a job's page."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Query
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmplane.dashboard.common import Dashboard, SignInRequired
from vmplane.dashboard.session import COOKIE, SIGNIN_COOKIE, clear_cookie, same, set_cookie
from vmplane.dashboard.views import ACTION_TITLES, age, job_page
from vmplane.jobs import service as jobs
from vmplane.jobs import tokens
from vmplane.jobs.service import ACTIVE, JobStatus
from vmplane.observe import logs
from vmplane.store.db import transaction

LIST_LIMIT = 100
log = logs.get(__name__)


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def router(dash: Dashboard) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.get("/")
    def root(request: Request) -> Response:
        try:
            dash.who(request)
        except SignInRequired:
            return see_other("/ui/sign-in")
        return see_other("/ui/jobs")

    @r.get("/ui")
    def ui_root() -> Response:
        return see_other("/")

    def sign_in_page(request: Request, status: int = 200, error: str | None = None) -> Response:
        # Before a session exists, a double-submit cookie is the form's CSRF token.
        token = request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)
        response = dash.render(request, "sign_in.html", None, status, csrf=token, error=error)
        set_cookie(response, request, SIGNIN_COOKIE, token, max_age=3600)
        return response

    @r.get("/ui/sign-in")
    def sign_in_form(request: Request) -> Response:
        return sign_in_page(request)

    @r.post("/ui/sign-in")
    def sign_in(request: Request, token: Annotated[str, Form()] = "", csrf: Annotated[str, Form()] = "") -> Response:
        expected = request.cookies.get(SIGNIN_COOKIE) or ""
        if not expected or not same(csrf, expected):
            return sign_in_page(request, 403, "The form's security token is missing or stale; try again.")
        with transaction(dash.settings.db_url) as s:
            row = tokens.verify(s, token.strip())
        if row is None:
            log.warning("dashboard sign-in refused: an invalid or revoked token")
            return sign_in_page(request, 401, "That token is not valid (or has been revoked).")
        log.info("dashboard sign-in: token %s (org %s, %s)", row.id, row.org, row.role)  # its id, never the token
        dash.sessions.drop(request.cookies.get(COOKIE))  # a new sign-in never reuses a session id
        sid, _ = dash.sessions.create(token.strip())
        response = see_other("/ui/jobs")
        set_cookie(response, request, COOKIE, sid)
        clear_cookie(response, request, SIGNIN_COOKIE)
        return response

    @r.get("/ui/sign-out")
    def sign_out_form(request: Request) -> Response:
        # Reached by the nav link without JavaScript: signing out changes state, so it is a POST.
        who = dash.who(request)
        return dash.render(request, "sign_out.html", who)

    @r.post("/ui/sign-out")
    def sign_out(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        who = dash.who(request)
        dash.check_csrf(request, who, csrf)
        dash.sessions.drop(who.sid)
        log.info("dashboard sign-out (org %s)", who.org)
        if request.headers.get("hx-request"):  # htmx follows redirects itself; tell it to navigate
            response: Response = Response(status_code=204, headers={"HX-Redirect": "/ui/sign-in"})
        else:
            response = see_other("/ui/sign-in")
        clear_cookie(response, request, COOKIE)
        return response

    @r.get("/ui/jobs")
    def list_jobs(request: Request, status: Annotated[str, Query()] = "") -> Response:
        who = dash.who(request)
        wanted = JobStatus(status) if status in JobStatus.__members__ else None
        with transaction(dash.settings.db_url) as s:
            views = [jobs.view(row) for row in jobs.list_jobs(s, who.org, limit=LIST_LIMIT, status=wanted)]
        rows = [
            {
                "id": v.id,
                "env": v.env,
                "status": v.status.value,
                "cloud": v.target.cloud.value,
                "where": v.target.describe(),
                "age": age(v.created_at),
                "created": v.created_at.isoformat(),
                "active": v.status in ACTIVE,
            }
            for v in views
        ]
        return dash.render(request, "jobs.html", who, rows=rows, statuses=[s.value for s in JobStatus], status=wanted)

    @r.get("/ui/jobs/{job_id}")
    def job(request: Request, job_id: str) -> Response:
        who = dash.who(request)
        page = job_page(dash.load(job_id, who), who.role)
        return dash.render(request, "job.html", who, page=page, titles=ACTION_TITLES)

    return r


def not_found_router(dash: Dashboard) -> APIRouter:
    """Any other `/ui/` address: a 404 page (included after the static mount, which it must not shadow)."""
    r = APIRouter(include_in_schema=False)

    @r.get("/ui/{rest:path}")
    def not_found(request: Request, rest: str) -> Response:
        who = dash.who(request)
        return dash.render(request, "error.html", who, 404, message=f"No page /ui/{rest}.", status=404)

    return r
