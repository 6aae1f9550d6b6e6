"""The job page's drift section, its `/ui/jobs/ID/drift` fragment and the repair's confirmation, against a
temp store: jobs are recorded and enqueued as the API does, and no workflow runs (a "provisioned" job is
written directly, as in test_dashboard_jobs.py).

The AWS driver's `drift` answers from a recorded list of `Drift` (tests/recorded_drift.py): no workflow
runs against a cloud here, and what each cloud finds is tested in the clouds' own tests. The pages, the
records and the operation recorded are real."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.recorded_drift import RecordedDrift, recorded

from vmplane.api import actions
from vmplane.clouds.errors import UnreachableError
from vmplane.envspec.load import load_spec
from vmplane.jobs import precheck
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobView
from vmplane.jobs.tokens import Role
from vmplane.store.db import transaction

from .test_dashboard import Dash, Page, make_dash
from .test_dashboard_jobs import WEB, provisioned


@dataclass
class Setup:
    dash: Dash
    fake: RecordedDrift
    job_id: str

    def job(self) -> JobView:
        with transaction(self.dash.settings.db_url) as s:
            return jobs.view(jobs.get_row(s, self.job_id))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """examples/web.jsonc recorded on the sandbox as the API records it (the cloud's stepValidate checks
    answered "no objection" and the sandbox's address given without starting it, as in
    test_dashboard_jobs.py); not provisioned yet."""
    monkeypatch.setattr(precheck, "problems", lambda *_a: [])
    monkeypatch.setattr(
        actions, "sandbox_endpoint", lambda settings, cloud: f"http://127.0.0.1:{settings.sandbox_port}"
    )
    fake = RecordedDrift()
    fake.install(monkeypatch)
    dash = make_dash(tmp_path)
    job_id = actions.create(dash.settings, load_spec(WEB), sandbox=True)
    yield Setup(dash, fake, job_id)


def section(html: str) -> Page:
    page = Page(html)
    page.one("section", id="drift")
    return page


def test_the_job_page_offers_the_check_only_at_rest_and_never_reads_the_cloud(env: Setup) -> None:
    c = env.dash.sign_in(env.dash.token(role=Role.operator))
    pending = section(c.get(f"/ui/jobs/{env.job_id}").text).one("section", id="drift")
    assert "this job is pending" in pending.text and not pending.find_all("a")
    provisioned(env.dash, env.job_id)
    page = section(c.get(f"/ui/jobs/{env.job_id}").text)
    drift = page.one("section", id="drift")
    assert drift.attrs["data-checked"] == "false"
    link = drift.one("a", id="check-drift")
    # Without JavaScript a link to the full page; with it, htmx swaps the section in place.
    assert link.attrs["href"] == link.attrs["hx-get"] == f"/ui/jobs/{env.job_id}/drift"
    assert (link.attrs["hx-target"], link.attrs["hx-select"]) == ("#drift", "#drift")
    assert not drift.find_all("a", data_action="repair")  # offered only once a read found something
    assert env.fake.reads == []


def test_the_fragment_lists_each_resource_its_change_and_fields_and_records_nothing(env: Setup) -> None:
    provisioned(env.dash, env.job_id)
    before = env.job()
    vm = before.infra.VMs[0]
    env.fake.drift = recorded(vm.Name, vm.ID or "", "sg-0vms")
    operator = env.dash.sign_in(env.dash.token(role=Role.operator))
    r = operator.get(f"/ui/jobs/{env.job_id}/drift", headers={"HX-Request": "true"})
    assert r.status_code == 200, r.text
    drift = section(r.text).one("section", id="drift")
    assert drift.attrs["data-checked"] == "true"
    rows = drift.one("table", id="drift-resources").find_all("tr", data_resource=None)
    assert [(row.attrs["data-resource"], row.attrs["data-change"], row.attrs["data-repairable"]) for row in rows] == [
        (f"aws_instance.{vm.Name}", "missing", "true"),
        ("aws_security_group.vms", "changed", "true"),
        ("aws_instance.i-0stray", "extra", "true"),
        ("aws_security_group.default", "changed", "false"),
    ]
    ingress = rows[1].one("li", data_field="ingress").text
    assert '"cidr": "10.42.0.0/16"' in ingress and '"cidr": "0.0.0.0/0"' in ingress.split("→")[1]
    assert rows[1].one("li", data_field="tags.zop:env").text.endswith('"fixed" → (absent)')
    assert f"({vm.ID})" in rows[0].text  # the cloud's id, when the address does not already name it
    assert "reported only" in rows[3].text
    assert drift.one(data_field="drift-summary").text == (
        "4 resource(s) drifted from the file; a repair fixes 3, 1 reported only (not vmplane's)."
    )
    repair = drift.one("a", data_action="repair")
    assert repair.attrs["href"] == f"/ui/jobs/{env.job_id}/actions/repair"
    assert drift.one("a", id="check-drift").text == "Check again"
    assert env.job().version == before.version and env.job().operation is None  # a read records nothing

    # Without htmx: the whole page, with the same section; a viewer reads it but is offered no repair.
    viewer = env.dash.sign_in(env.dash.token(role=Role.viewer), env.dash.fresh_client())
    page = section(viewer.get(f"/ui/jobs/{env.job_id}/drift").text)
    assert page.one("h1").text.startswith("Drift: demo-web")
    assert len(page.one("table", id="drift-resources").find_all("tr", data_resource=None)) == 4
    assert not page.find_all("a", data_action="repair")
    assert env.fake.reads == [env.job_id, env.job_id]


def test_the_fragment_says_why_nothing_could_be_read(env: Setup) -> None:
    c = env.dash.sign_in(env.dash.token(role=Role.operator))
    r = c.get(f"/ui/jobs/{env.job_id}/drift")  # pending: its record does not say what the cloud holds
    assert r.status_code == 409 and "is pending" in section(r.text).one(role="alert").text
    provisioned(env.dash, env.job_id)
    env.fake.error = UnreachableError("connection refused", operation="ec2.DescribeInstances")
    r = c.get(f"/ui/jobs/{env.job_id}/drift")
    assert r.status_code == 502
    assert section(r.text).one(role="alert").text.startswith("The cloud could not be read: ec2.DescribeInstances")
    # htmx swaps only a 2xx answer: the section it asked for carries the refusal.
    r = c.get(f"/ui/jobs/{env.job_id}/drift", headers={"HX-Request": "true"})
    assert r.status_code == 200 and section(r.text).one(role="alert")
    env.fake.error, env.fake.drift = None, []
    drift = section(c.get(f"/ui/jobs/{env.job_id}/drift").text).one("section", id="drift")
    assert drift.one(data_field="drift-summary").text.startswith("No drift")
    assert not drift.find_all("a", data_action="repair") and not drift.find_all("table")
    assert c.get("/ui/jobs/job-nosuch/drift").status_code == 404


def test_repair_is_confirmed_first_and_records_the_apis_repair_operation(env: Setup) -> None:
    provisioned(env.dash, env.job_id)
    vm = env.job().infra.VMs[0]
    env.fake.drift = recorded(vm.Name, vm.ID or "", "sg-0vms")
    c = env.dash.sign_in(env.dash.token(role=Role.operator))
    confirm = Page(c.get(f"/ui/jobs/{env.job_id}/actions/repair").text)
    assert not confirm.find_all(role="alert")  # offered: there is something to repair
    preview = confirm.one(id="preview")
    lines = [(li.attrs["data-resource"], li.attrs["data-change"]) for li in preview.find_all("li", data_change=None)]
    assert lines == [(d.resource, d.change.value) for d in env.fake.drift]
    assert "Plan: 1 to add, 1 to change, 1 to destroy." in preview.text  # the user's group is not counted
    form = confirm.one("form", id="confirm")
    assert form.one("button").text == "Confirm: repair the drift" and form.one("button").attrs["class"] == "danger"
    assert "Cancel" in [a.text for a in form.find_all("a", href=f"/ui/jobs/{env.job_id}")]  # back to the job
    assert env.job().operation is None  # the confirmation page records nothing

    data = {"csrf": confirm.csrf("confirm"), "version": form.one("input", name="version").attrs["value"]}
    viewer = env.dash.sign_in(env.dash.token(role=Role.viewer), env.dash.fresh_client())
    csrf = Page(viewer.get(f"/ui/jobs/{env.job_id}").text).one("meta", name="csrf-token").attrs["content"]
    assert viewer.post(f"/ui/jobs/{env.job_id}/actions/repair", data={**data, "csrf": csrf}).status_code == 403
    r = c.post(f"/ui/jobs/{env.job_id}/actions/repair", data=data, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, f"/ui/jobs/{env.job_id}")
    job = env.job()
    assert job.operation is not None and job.operation.kind == "repair" and job.operation.params == {"drift": 4}
    assert [s.name for s in job.operation.steps][:2] == ["stepValidate", "stepRepairDrift"]
    # The same confirmation again is stale (the job moved on), refused before the cloud is read.
    reads = len(env.fake.reads)
    r = c.post(f"/ui/jobs/{env.job_id}/actions/repair", data=data)
    assert r.status_code == 412 and "changed since you read it" in Page(r.text).one(role="alert").text
    assert len(env.fake.reads) == reads
    assert env.job().version == job.version


def test_nothing_to_repair_is_refused_and_records_nothing(env: Setup) -> None:
    provisioned(env.dash, env.job_id)
    env.fake.drift = [d for d in recorded("vm-0", "i-0", "sg-0vms") if not d.repairable]  # the user's only
    c = env.dash.sign_in(env.dash.token(role=Role.operator))
    confirm = Page(c.get(f"/ui/jobs/{env.job_id}/actions/repair").text)
    assert "does not apply" in confirm.one(role="alert").text
    data = {"csrf": confirm.csrf("confirm"), "version": str(env.job().version)}
    r = c.post(f"/ui/jobs/{env.job_id}/actions/repair", data=data)
    assert r.status_code == 409 and "nothing to repair" in Page(r.text).one(role="alert").text
    assert env.job().operation is None
