"""The new-environment wizard: paste or upload a JSONC file, see every error at its line:col (the loader
`vmplane validate` uses), the plan with its impact (`vmplane plan`'s), the cost (`vmplane cost`'s), then
apply through the same path as `POST /provisioning-jobs`. Nothing is created until the check passes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmplane.api import actions
from vmplane.cost.estimate import estimate
from vmplane.dashboard.common import Dashboard, Who
from vmplane.dashboard.runtime_view import RuntimeRow, runtime_rows
from vmplane.envspec.base import Cloud
from vmplane.envspec.impact import CONSEQUENCE
from vmplane.envspec.jsonc import JsoncSyntaxError, parse_jsonc
from vmplane.envspec.load import SpecError, SpecIssue, parse_spec_text
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.percloud import spec_warnings
from vmplane.envspec.starter import render_starter
from vmplane.errors import VmplaneError
from vmplane.jobs import operations
from vmplane.jobs.operations import ApplyPlan, Decision
from vmplane.jobs.precheck import RefusedBeforeJobError, issues_at
from vmplane.jobs.service import Phase
from vmplane.jobs.tokens import Role
from vmplane.observe import logs
from vmplane.settings import Settings
from vmplane.target import Target

_log = logs.get(__name__)
UPLOAD_LIMIT = 256 * 1024  # an environment file is a few KB; refuse anything far larger
PASTED = "pasted.jsonc"


@dataclass
class Checked:
    """One check of a file: its issues, or the spec with its plan and cost."""

    text: str
    filename: str
    issues: list[SpecIssue]
    spec: EnvSpec | None = None
    plan: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    conflict: str | None = None  # why it cannot be applied although it is valid (an existing job)
    planned: ApplyPlan | None = None  # what `plan` showed, which the apply then records
    warnings: list[SpecIssue] = field(default_factory=list)  # validate's: plain values named like secrets
    runtime: list[RuntimeRow] = field(default_factory=list)  # references shown as such, secret-like values masked


def _org_issue(text: str, spec: EnvSpec, who: Who) -> SpecIssue | None:
    """The token's org must be the file's (the API answers 403 otherwise); placed at the org's value."""
    if spec.org == who.org:
        return None
    try:
        _, positions = parse_jsonc(text)
        line, col = positions.values.get(("org",), (1, 1))
    except JsoncSyntaxError:
        line, col = 1, 1
    return SpecIssue("org", f"your token is for org {who.org!r}, not {spec.org!r}", line, col)


def check(settings: Settings, who: Who, text: str, filename: str, sandbox: bool) -> Checked:
    try:
        spec = parse_spec_text(text, filename)
    except SpecError as err:
        return Checked(text, filename, err.issues)
    if (issue := _org_issue(text, spec, who)) is not None:
        return Checked(text, filename, [issue])
    out = Checked(text, filename, [], spec=spec, cost=estimate(spec).to_json())
    out.warnings, out.runtime = issues_at(text, spec_warnings(spec)), runtime_rows(spec)
    try:
        # The plan runs stepValidate's read-only cloud checks for a new job: the sandbox must be running.
        address = actions.sandbox_endpoint(settings, spec.provider.cloud) if sandbox else None
        # No refresh: the wizard creates new jobs only; an existing job is a conflict, its drift not read.
        where = Target.for_spec(spec, address)
        ap = operations.plan_apply(settings, spec, where, say=_log.info, refresh=False)
    except RefusedBeforeJobError as err:  # what the cloud refuses, at its field in the file (422)
        return Checked(text, filename, issues_at(text, err.problems))
    except VmplaneError as err:
        out.conflict = str(err)
        return out
    out.planned = ap
    out.plan = {
        **ap.plan.to_json(),
        "changes": [{**c.to_json(), "consequence": CONSEQUENCE[c.impact]} for c in ap.changes],
        "refusals": ap.refusals,
    }
    if ap.decision is not Decision.new:
        out.conflict = (
            f"{spec.org}/{spec.name} already has job {ap.job.id if ap.job else '?'}: "
            "change it from its page, or destroy it first"
        )
    return out


def router(dash: Dashboard) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    def page(request: Request, who: Who, checked: Checked | None, sandbox: bool, status: int = 200) -> Response:
        return dash.render(request, "new.html", who, status, checked=checked, sandbox=sandbox)

    @r.get("/ui/new")
    def new(request: Request, starter: str = "", name: str = "") -> Response:
        who = dash.needs(request, Role.operator)
        if not starter:
            return page(request, who, None, sandbox=True)
        # A commented starter file for the caller's org, as `vmplane init` writes it, to edit and check.
        try:
            text = render_starter(name or "demo", who.org, cloud=Cloud(starter))
        except ValueError as err:
            return dash.render(request, "new.html", who, 422, checked=None, sandbox=True, starter_error=str(err))
        return page(request, who, Checked(text, PASTED, []), sandbox=True)

    @r.post("/ui/new/check")
    def check_file(
        request: Request,
        spec: Annotated[str, Form()] = "",
        file: Annotated[UploadFile | None, File()] = None,
        sandbox: Annotated[bool, Form()] = False,
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        who = dash.needs(request, Role.operator)
        dash.check_csrf(request, who, csrf)
        text, filename = spec, PASTED
        if file is not None and file.filename:
            raw = file.file.read(UPLOAD_LIMIT + 1)
            if len(raw) > UPLOAD_LIMIT:
                issue = SpecIssue("$", f"the file is larger than {UPLOAD_LIMIT // 1024} KB", 1, 1)
                return page(request, who, Checked("", file.filename, [issue]), sandbox, 422)
            try:
                text, filename = raw.decode("utf-8-sig"), file.filename
            except UnicodeDecodeError as err:
                issue = SpecIssue("$", f"not UTF-8 text (bad byte at offset {err.start})", 1, 1)
                return page(request, who, Checked("", file.filename, [issue]), sandbox, 422)
        checked = check(dash.settings, who, text, filename, sandbox)
        return page(request, who, checked, sandbox, 422 if checked.issues else 409 if checked.conflict else 200)

    @r.post("/ui/new/apply")
    def apply(
        request: Request,
        spec: Annotated[str, Form()] = "",
        filename: Annotated[str, Form()] = PASTED,
        sandbox: Annotated[bool, Form()] = False,
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        who = dash.needs(request, Role.operator)
        dash.check_csrf(request, who, csrf)
        # The text is checked again: the hidden field came back from the browser.
        checked = check(dash.settings, who, spec, filename, sandbox)
        if checked.issues or checked.conflict or checked.spec is None:
            return page(request, who, checked, sandbox, 422 if checked.issues else 409)
        try:
            job_id = actions.create(dash.settings, checked.spec, sandbox=sandbox, planned=checked.planned)
        except VmplaneError as err:
            checked.conflict = str(err)
            return page(request, who, checked, sandbox, err.http_status)
        dash.start(job_id, Phase.provision)
        return RedirectResponse(f"/ui/jobs/{job_id}", status_code=303)

    return r
