"""The dashboard's wizard, jobs list, job page, actions and live events, against a temp store: jobs are
recorded and enqueued as the API does, and no workflow runs (a "provisioned" job is written directly)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from tests import deps_servers

from vmplane.api import actions
from vmplane.jobs import precheck
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobStatus
from vmplane.jobs.tokens import Role, issue_token, revoke_token
from vmplane.state import InfraConfig, VMRecord, VMState
from vmplane.store.db import transaction
from vmplane.store.models import JobRow

from .test_dashboard import Dash, Page, make_dash

WEB = Path(__file__).resolve().parents[2] / "examples" / "web.jsonc"


@pytest.fixture
def dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dash]:
    """No cloud and no sandbox run here: these tests are about the wizard's pages and records. So the
    cloud's answer to stepValidate's checks (jobs/precheck.py, which for a new job asks the sandbox, or the
    real account when `sandbox` is unchecked) is "no objection", and the sandbox's address is given without
    starting it. What the precheck refuses is tested against the sandbox (tests/integration/
    test_refused_before_job.py) and shown here by `refusing`. Real (non-sandbox) applies find the
    manifests' sources reachable, as on a connected site: the fake upstreams (tests/deps_servers.py) stand
    in for them, so the shipped manifests' unpinned al2023 and NGINX image are fetched before the job."""
    monkeypatch.setattr(precheck, "problems", lambda *_a: [])
    monkeypatch.setattr(
        actions, "sandbox_endpoint", lambda settings, cloud: f"http://127.0.0.1:{settings.sandbox_port}"
    )
    with deps_servers.serve("amd64") as upstream:
        monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", upstream.mirrors())
        yield make_dash(tmp_path)


def job_count(dash: Dash) -> int:
    with transaction(dash.settings.db_url) as s:
        return int(s.scalar(select(func.count()).select_from(JobRow)) or 0)


def check(c, text: str, sandbox: bool = True):  # type: ignore[no-untyped-def]
    csrf = Page(c.get("/ui/new").text).csrf("new-env")
    data = {"spec": text, "csrf": csrf, **({"sandbox": "true"} if sandbox else {})}
    return c.post("/ui/new/check", data=data)


def apply(dash: Dash, c, text: str) -> str:  # type: ignore[no-untyped-def]
    page = Page(check(c, text).text)
    form = page.one("form", id="apply")
    data = {i.attrs["name"]: i.attrs.get("value", "") for i in form.find_all("input", type="hidden")}
    r = c.post("/ui/new/apply", data=data, follow_redirects=False)  # sandbox unchecked: nothing starts it
    assert r.status_code == 303, r.text
    return str(r.headers["location"]).rsplit("/", 1)[1]


def provisioned(dash: Dash, job_id: str) -> None:
    """What a finished provisioning leaves in the record: VMs, the LB, status succeeded."""
    vms = [
        VMRecord(Name=f"vm-{i}", Pool="web", Index=i, ID=f"i-{i}", PrivateIP=f"10.42.128.{i + 4}", AZ="us-east-1a")
        for i in range(2)
    ]
    for vm in vms:
        vm.State, vm.LaunchTemplateVersion = VMState.ready, 1
    vms[1].LaunchTemplateVersion = 0  # outdated
    infra = InfraConfig(VMs=vms, LoadBalancerID="lb-1", LoadBalancerDNSName="demo-web-1.elb.amazonaws.com")
    infra.LaunchTemplateVersion = {"web": 1}
    with transaction(dash.settings.db_url) as s:
        jobs.save_infra(s, job_id, infra)
        jobs.set_status(s, job_id, JobStatus.succeeded)


def test_the_wizard_shows_every_error_at_line_and_column_and_creates_nothing(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.operator))
    broken = WEB.read_text().replace('"min": 2', '"min": "two"').replace('"zones": 2', '"zones": 2, "colour": 1')
    r = check(c, broken)
    assert r.status_code == 422
    errors = [li.text for li in Page(r.text).one("ul", id="errors").find_all("li")]
    assert any(e.startswith("13:") and "network" in e and "colour" in e for e in errors), errors
    assert any(e.startswith("19:14") and "pools.web.min" in e for e in errors), errors
    r = check(c, WEB.read_text().replace('"org": "acme"', '"org": "globex"'))  # the token's org decides
    assert "org" in Page(r.text).one("ul", id="errors").text and not Page(r.text).find_all("form", id="apply")
    r = check(c, "{ not json")
    assert Page(r.text).one("ul", id="errors").find_all("li")[0].text.startswith("1:")
    # Applying a broken file is refused the same way (the hidden field is checked again).
    r = c.post("/ui/new/apply", data={"spec": broken, "csrf": Page(r.text).csrf("new-env")})
    assert r.status_code == 422 and Page(r.text).find_all("ul", id="errors")
    assert job_count(dash) == 0


def test_the_wizard_plans_and_costs_the_web_example_then_applies_it(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.operator))
    page = Page(check(c, WEB.read_text()).text)
    plan = page.one(id="plan")
    assert "stepCreateLoadBalancer" in plan.text and "Plan:" in plan.text
    assert len(plan.find_all("li", data_action="+")) >= 10
    assert "USD" in page.one(id="cost").text
    apply_form = page.one("form", id="apply")
    assert apply_form.one("input", type="checkbox", name="sandbox").attrs.get("checked") is not None
    assert apply_form.one("button").text == "Apply"
    assert job_count(dash) == 0  # a check creates nothing

    job_id = apply(dash, c, WEB.read_text())
    job = Page(c.get(f"/ui/jobs/{job_id}").text)
    assert job.one(id="job-status").attrs["data-status"] == "pending"
    assert job.one("ol", id="steps").find_all("li", data_step="stepCreateVMs", data_status="pending")
    # The same environment again is a conflict, as `POST /provisioning-jobs` answers 409.
    r = check(c, WEB.read_text(), sandbox=False)
    assert r.status_code == 409
    assert "already has job" in Page(r.text).one(role="alert").text and not Page(r.text).find_all("form", id="apply")
    listed = Page(c.get("/ui/jobs").text).one("table", id="jobs").one("tr", data_job_id=job_id)
    assert listed.one(data_field="environment").text == "demo-web" and listed.one(data_field="cloud").text == "aws"
    assert listed.one(data_field="status").text == "pending" and listed.find_all("a", href=f"/ui/jobs/{job_id}")
    assert not Page(c.get("/ui/jobs?status=succeeded").text).find_all("tr", data_job_id=job_id)
    assert Page(c.get("/ui/jobs").text).one("table", id="jobs").attrs["hx-trigger"] == "every 5s"  # a job runs


def test_what_the_cloud_would_refuse_is_shown_at_its_field_and_records_nothing(
    dash: Dash, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = "pools.web.instanceType: e2-small [x] is not offered in us-east-1's zones"
    monkeypatch.setattr(precheck, "problems", lambda *_a: [said])
    c = dash.sign_in(dash.token(role=Role.operator))
    text = WEB.read_text()
    r = check(c, text)
    assert r.status_code == 422
    (error,) = [li.text for li in Page(r.text).one("ul", id="errors").find_all("li")]
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"instanceType"' in row)
    assert error.startswith(f"{line}:") and "e2-small [x] is not offered" in error, error
    assert not Page(r.text).find_all("form", id="apply") and job_count(dash) == 0


def test_the_job_page_shows_vms_lb_outdated_cost_and_the_actions_the_role_allows(dash: Dash) -> None:
    admin = dash.sign_in(dash.token())
    job_id = apply(dash, admin, WEB.read_text())
    provisioned(dash, job_id)
    page = Page(admin.get(f"/ui/jobs/{job_id}").text)
    assert page.one(id="job-status").attrs["data-status"] == "succeeded"
    vm = page.one("table", id="vms").one("tr", data_vm="vm-0")
    assert [vm.one(data_field=f).text for f in ("lifecycle", "private-ip", "zone")] == [
        "ready",
        "10.42.128.4",
        "us-east-1a",
    ]
    assert page.one(id="load-balancer").one(data_field="dns-name").text == "demo-web-1.elb.amazonaws.com"
    assert "vm-1" in page.one(id="outdated").text and "vm-0" not in page.one(id="outdated").text
    assert "USD" in page.one(id="cost").text
    offered = [a.attrs["data-action"] for a in page.one(id="actions").find_all("a", data_action=None)]
    assert offered == ["detach-lb", "scale", "rotate", "stop", "destroy"]  # attached LB, pools running
    assert "hx-trigger" not in Page(admin.get("/ui/jobs").text).one("table", id="jobs").attrs  # nothing runs

    operator = dash.sign_in(dash.token(role=Role.operator), dash.fresh_client())
    offered = [
        a.attrs["data-action"] for a in Page(operator.get(f"/ui/jobs/{job_id}").text).find_all("a", data_action=None)
    ]
    assert "destroy" not in offered and "detach-lb" in offered
    viewer = dash.sign_in(dash.token(role=Role.viewer), dash.fresh_client())
    page = Page(viewer.get(f"/ui/jobs/{job_id}").text)
    assert not page.find_all("a", data_action=None)
    csrf = page.one("meta", name="csrf-token").attrs["content"]
    for action in ("detach-lb", "destroy"):
        assert viewer.post(f"/ui/jobs/{job_id}/actions/{action}", data={"csrf": csrf}).status_code == 403
        assert viewer.get(f"/ui/jobs/{job_id}/actions/{action}").status_code == 403


def test_another_orgs_job_does_not_exist(dash: Dash) -> None:
    job_id = apply(dash, dash.sign_in(dash.token()), WEB.read_text())
    other = dash.sign_in(dash.token(org="globex"), dash.fresh_client())
    for path in (f"/ui/jobs/{job_id}", f"/ui/jobs/{job_id}/events", f"/ui/jobs/{job_id}/actions/scale"):
        r = other.get(path)
        assert r.status_code == 404 and job_id in Page(r.text).one(role="alert").text, path
    assert not Page(other.get("/ui/jobs").text).find_all("tr", data_job_id=job_id)


def test_an_action_records_the_operation_through_the_apis_planner(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    job_id = apply(dash, c, WEB.read_text())
    provisioned(dash, job_id)
    confirm = Page(c.get(f"/ui/jobs/{job_id}/actions/scale").text)
    form = confirm.one("form", id="confirm")
    assert form.one("button").text.startswith("Confirm")
    version = form.one("input", name="version").attrs["value"]
    data = {"csrf": confirm.csrf("confirm"), "version": version, "pool": "web", "min": "1", "desired": "3", "max": "4"}
    # A refusal from the planner re-renders the confirmation with the reason.
    r = c.post(f"/ui/jobs/{job_id}/actions/scale", data={**data, "min": "5"})
    assert r.status_code == 422 and "pools.web" in Page(r.text).one(role="alert").text
    r = c.post(f"/ui/jobs/{job_id}/actions/scale", data=data, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, f"/ui/jobs/{job_id}")
    with transaction(dash.settings.db_url) as s:
        job = jobs.view(jobs.get_row(s, job_id))
    assert job.status is JobStatus.pending and job.version > int(version)
    assert job.operation is not None and job.operation.kind == "scale"
    assert (job.spec.pools["web"].min, job.spec.pools["web"].desired) == (1, 3)  # type: ignore[union-attr]
    # The same confirmation again is stale (the job moved on), and nothing more is recorded.
    r = c.post(f"/ui/jobs/{job_id}/actions/scale", data=data)
    assert r.status_code in (409, 412) and Page(r.text).one(role="alert").text
    page = Page(c.get(f"/ui/jobs/{job_id}").text)
    assert page.one("ol", id="operation-steps").find_all("li", data_step="stepScalePool", data_status="pending")
    assert not page.find_all("a", data_action=None)  # nothing else while it runs


def test_attach_is_prefilled_with_the_detached_block(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    job_id = apply(dash, c, WEB.read_text())
    provisioned(dash, job_id)
    confirm = Page(c.get(f"/ui/jobs/{job_id}/actions/detach-lb").text)
    assert "stepDetachLoadBalancer" in confirm.one(id="preview").text
    data = {"csrf": confirm.csrf("confirm"), "version": confirm.one("input", name="version").attrs["value"]}
    assert c.post(f"/ui/jobs/{job_id}/actions/detach-lb", data=data, follow_redirects=False).status_code == 303
    with transaction(dash.settings.db_url) as s:  # the detach workflow's end, as it records it
        jobs.save_infra(
            s,
            job_id,
            InfraConfig.model_validate({**jobs.view(jobs.get_row(s, job_id)).config["infra"], "LoadBalancerID": None}),
        )
        jobs.set_status(s, job_id, JobStatus.succeeded)
    page = Page(c.get(f"/ui/jobs/{job_id}").text)
    assert page.one(id="load-balancer").one(data_field="dns-name").text == "none"
    assert "attach-lb" in [a.attrs["data-action"] for a in page.find_all("a", data_action=None)]
    attach = Page(c.get(f"/ui/jobs/{job_id}/actions/attach-lb").text)
    assert json.loads(attach.one("textarea", name="load_balancer").raw)["domain"] == "web.sandbox.vmplane.test"
    assert "stepCreateLoadBalancer" in attach.one(id="preview").text  # the plan of the remembered block


def test_events_stream_the_live_regions_and_end_with_the_job(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    job_id = apply(dash, c, WEB.read_text())
    provisioned(dash, job_id)  # not active: one update, then the end
    with c.stream("GET", f"/ui/jobs/{job_id}/events") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    events = [block for block in body.split("\n\n") if block.startswith("event:")]
    assert [e.split("\n")[0] for e in events] == ["event: job", "event: end"]
    update = json.loads(events[0].split("data: ", 1)[1])
    assert update["status"] == "succeeded"
    steps = Page(update["html"]["steps-section"]).one("ol", id="steps")
    assert steps.find_all("li", data_step="stepValidate", data_status="pending")
    assert Page(update["html"]["job-status"]).one(id="job-status").attrs["data-status"] == "succeeded"


def test_destroy_needs_admin_and_records_the_teardown(dash: Dash) -> None:
    admin = dash.sign_in(dash.token())
    job_id = apply(dash, admin, WEB.read_text())
    provisioned(dash, job_id)
    operator = dash.sign_in(dash.token(role=Role.operator), dash.fresh_client())
    csrf = Page(operator.get(f"/ui/jobs/{job_id}").text).one("meta", name="csrf-token").attrs["content"]
    assert operator.post(f"/ui/jobs/{job_id}/actions/destroy", data={"csrf": csrf}).status_code == 403
    confirm = Page(admin.get(f"/ui/jobs/{job_id}/actions/destroy").text)
    assert "to destroy" in confirm.one(id="preview").text
    data = {"csrf": confirm.csrf("confirm"), "version": confirm.one("input", name="version").attrs["value"]}
    assert admin.post(f"/ui/jobs/{job_id}/actions/destroy", data=data, follow_redirects=False).status_code == 303
    page = Page(admin.get(f"/ui/jobs/{job_id}").text)
    assert page.one(id="job-status").attrs["data-status"] == "deleting"
    steps = page.one("ol", id="steps")
    assert steps.attrs["data-phase"] == "teardown" and steps.find_all("li", data_status="pending")
    assert page.one(id="live").attrs["data-events"] == f"/ui/jobs/{job_id}/events"  # the page listens while it runs


def test_a_starter_file_for_the_callers_org_checks_clean(dash: Dash) -> None:
    c = dash.sign_in(dash.token(org="globex", role=Role.operator))
    text = Page(c.get("/ui/new?starter=gcp&name=shop").text).one("textarea", name="spec").raw
    assert '"org": "globex"' in text and '"name": "shop"' in text
    page = Page(check(c, text, sandbox=False).text)
    assert not page.find_all("ul", id="errors") and page.find_all("form", id="apply")
    assert c.get("/ui/new?starter=aws&name=Not_DNS").status_code == 422


def test_an_uploaded_file_is_checked_under_its_own_name(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.operator))
    csrf = Page(c.get("/ui/new").text).csrf("new-env")
    broken = WEB.read_text().replace('"desired": 2', '"desired": 9')  # above max 4
    r = c.post("/ui/new/check", data={"csrf": csrf}, files={"file": ("web-broken.jsonc", broken.encode())})
    page = Page(r.text)
    assert r.status_code == 422 and page.one(id="result").one("h2").text == "web-broken.jsonc"
    assert any("pools.web" in li.text for li in page.one("ul", id="errors").find_all("li"))
    r = c.post("/ui/new/check", data={"csrf": csrf}, files={"file": ("bin.jsonc", b"\xff\xfe{")})
    assert "UTF-8" in Page(r.text).one("ul", id="errors").text
    assert job_count(dash) == 0


def test_events_follow_a_running_job_until_it_ends(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    job_id = apply(dash, c, WEB.read_text())  # pending: the page listens

    def finish() -> None:  # what the workflow would write: a step running, then the job done
        with transaction(dash.settings.db_url) as s:
            jobs.set_status(s, job_id, JobStatus.running)
        with transaction(dash.settings.db_url) as s:
            jobs.set_status(s, job_id, JobStatus.succeeded)

    statuses = []
    with c.stream("GET", f"/ui/jobs/{job_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"html"' in line:
                statuses.append(json.loads(line[6:])["status"])
                if len(statuses) == 1:
                    threading.Timer(0.2, finish).start()
            elif line.startswith("event: end"):
                break
    assert statuses[0] == "pending" and statuses[-1] == "succeeded"


def test_a_revoked_token_ends_the_event_stream(dash: Dash) -> None:
    issued = issue_token(dash.settings, "acme", Role.admin)
    c = dash.sign_in(issued.token)
    job_id = apply(dash, c, WEB.read_text())  # pending: the stream would go on
    events = []
    with c.stream("GET", f"/ui/jobs/{job_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
                if len(events) == 1:
                    threading.Timer(0.2, revoke_token, (dash.settings, issued.id, "acme")).start()
            elif events[-1:] == ["end"] and line.startswith("data: "):
                assert json.loads(line[6:]) == {"status": "signed-out"}
                break
    assert events == ["job", "end"]


def test_destroying_a_job_that_created_nothing_forgets_it_and_starts_no_teardown(dash: Dash) -> None:
    admin = dash.sign_in(dash.token())
    job_id = apply(dash, admin, WEB.read_text())
    with transaction(dash.settings.db_url) as s:  # as stepValidate's refusal leaves it
        jobs.update_step(s, job_id, "stepValidate", status=jobs.StepStatus.failed, error="refused")
        jobs.set_status(s, job_id, JobStatus.failed, "stepValidate: refused")
    confirm = Page(admin.get(f"/ui/jobs/{job_id}/actions/destroy").text)
    data = {"csrf": confirm.csrf("confirm"), "version": confirm.one("input", name="version").attrs["value"]}
    assert admin.post(f"/ui/jobs/{job_id}/actions/destroy", data=data, follow_redirects=False).status_code == 303
    with transaction(dash.settings.db_url) as s:
        row = jobs.get_row(s, job_id)
        assert (row.status, row.teardown_steps) == ("deleted", [])  # no teardown was recorded to run
