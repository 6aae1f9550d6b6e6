"""What every dashboard route shares: who is signed in (the token verified on every request, as the API
does), the CSRF check, loading a job of the caller's org, rendering a template, and starting a workflow
after the commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates
from starlette.requests import Request
from starlette.responses import Response

from vmplane.dashboard.session import COOKIE, CSRF_HEADER, Session, Sessions, same
from vmplane.errors import VmplaneError
from vmplane.jobs import operations, tokens
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobView, Phase
from vmplane.jobs.tokens import Role
from vmplane.settings import Settings
from vmplane.store.db import transaction

HERE = Path(__file__).parent


class SignInRequired(Exception):
    """No session, or its token is no longer valid: the answer is a redirect to the sign-in page."""


class PageError(Exception):
    """An error the dashboard answers with an HTML page of this status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Who:
    org: str
    role: Role
    sid: str
    session: Session

    @property
    def csrf(self) -> str:
        return self.session.csrf

    def can(self, role: Role) -> bool:
        return self.role.allows(role)


class Dashboard:
    def __init__(self, settings: Settings, *, run_workflows: bool) -> None:
        self.settings = settings
        self.run_workflows = run_workflows
        self.sessions = Sessions()
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.globals["role_allows"] = lambda who, role: who is not None and who.can(Role(role))

    # ---- who is asking ----

    def who(self, request: Request) -> Who:
        """The signed-in caller; the token is verified now, so a revoked one signs the session out."""
        sid = request.cookies.get(COOKIE)
        session = self.sessions.get(sid)
        if sid is None or session is None:
            raise SignInRequired
        with transaction(self.settings.db_url) as s:
            row = tokens.verify(s, session.token)
            if row is None:
                self.sessions.drop(sid)
                raise SignInRequired
            return Who(row.org, Role(row.role), sid, session)

    def needs(self, request: Request, role: Role) -> Who:
        who = self.who(request)
        if not who.can(role):
            raise PageError(403, f"This needs the {role.value} role; your token has {who.role.value}.")
        return who

    def check_csrf(self, request: Request, who: Who, form_value: str | None) -> None:
        presented = form_value or request.headers.get(CSRF_HEADER)
        if not same(presented, who.csrf):
            raise PageError(403, "The form's security token is missing or stale; reload the page and try again.")

    # ---- jobs ----

    def load(self, job_id: str, who: Who) -> JobView:
        try:
            with transaction(self.settings.db_url) as s:
                job = jobs.view(jobs.get_row(s, job_id))
        except VmplaneError:
            raise PageError(404, f"No job {job_id}.") from None
        if job.org != who.org:
            raise PageError(404, f"No job {job_id}.")  # another org's job does not exist for this caller
        return job

    def start(self, job_id: str, phase: Phase) -> None:
        """As the API does after its commit: run here, or hand to the workers' queue."""
        if self.run_workflows:
            operations.start(self.settings, job_id, phase)
        else:
            operations.enqueue(self.settings, job_id, phase)

    # ---- pages ----

    def render(self, request: Request, name: str, who: Who | None, status_code: int = 200, **context: Any) -> Response:
        ctx = {"who": who, "csrf": who.csrf if who else context.pop("csrf", ""), **context}
        return self.templates.TemplateResponse(request, name, ctx, status_code=status_code)
