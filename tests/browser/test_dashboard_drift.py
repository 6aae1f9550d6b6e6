"""The job page's drift section in a real browser, with the keyboard: check for drift (htmx swaps the section
in place), see each drifted resource, open the repair's confirmation, confirm it, watch the repair run
and check again; a viewer reads the drift but is offered no repair; without JavaScript the check is a
page of its own.

The server runs in this process (uvicorn in a thread, its workflows here too) so that the AWS driver's
`drift` and `repair_drift` can answer from a recorded list of `Drift` (tests/recorded_drift.py): the
test decides what is found, and what each cloud finds and repairs is tested in the clouds' own tests (the
real AWS driver through the API: test_api_drift_aws.py). Everything above the driver is real: the pages,
the job records, the repair operation's run on the sandbox."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.browser.harness import DESKTOP, SLOW_MS, Shots, Ui, missing_browser
from tests.browser.test_dashboard_flow import reload_until
from tests.helpers import EXAMPLES, Sandbox, free_port
from tests.recorded_drift import RecordedDrift, recorded

from vmplane.envspec.load import load_spec

if missing_browser():
    pytest.skip(missing_browser(), allow_module_level=True)

from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.browser]

NAME = "ui-drift"


@dataclass
class Served:
    url: str
    tokens: dict[str, str]  # role -> token of acme
    fake: RecordedDrift

    def api(self, role: str = "admin") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.tokens[role]}"}, timeout=60)


@pytest.fixture(scope="module")
def served(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    import uvicorn

    from vmplane.dashboard import create_server
    from vmplane.jobs import tokens
    from vmplane.pipeline import engine
    from vmplane.settings import get_settings
    from vmplane.store.db import transaction

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMPLANE_HOME", str(tmp_path_factory.mktemp("ui-drift-home")))
        mp.setenv("VMPLANE_SANDBOX_PORT", str(sandbox.port))
        mp.setenv("VMPLANE_GCP_SANDBOX_PORT", str(sandbox.gcp_port))
        get_settings.cache_clear()
        fake = RecordedDrift()
        fake.install(mp)
        settings = get_settings()
        settings.ensure_home()
        with transaction(settings.db_url) as s:
            made = {r: tokens.create_token(s, "acme", tokens.Role(r))[0] for r in ("viewer", "operator", "admin")}
        port = free_port()
        config = uvicorn.Config(create_server(settings), host="127.0.0.1", port=port, log_config=None)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="ui-drift-server", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while not server.started:
                assert thread.is_alive() and time.monotonic() < deadline, "the in-process server did not start"
                time.sleep(0.1)
            yield Served(f"http://127.0.0.1:{port}", made, fake)
        finally:
            fake.release.set()
            server.should_exit = True
            thread.join(30)
            engine.shutdown()
            get_settings.cache_clear()


@pytest.fixture
def open_ui(browser: Any, served: Served, shots: Shots, request: pytest.FixtureRequest) -> Iterator[Any]:
    """As tests/browser/conftest.py's `open_ui`, on this module's server."""
    test = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name.removeprefix("test_"))
    opened: list[Ui] = []

    def make(javascript: bool = True) -> Ui:
        context = browser.new_context(viewport=DESKTOP, java_script_enabled=javascript)
        ui = Ui(context, served.url, shots, test, javascript)
        ui.page.set_default_timeout(60_000)
        opened.append(ui)
        return ui

    yield make
    for ui in opened:
        ui.context.close()
    for ui in opened:
        ui.check_clean()


def provisioned(served: Served) -> dict[str, Any]:
    doc = load_spec(EXAMPLES / "fixed.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["name"] = NAME
    with served.api() as c:
        r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc)
        assert r.status_code == 201, r.text
        deadline = time.monotonic() + 240
        while (job := c.get(f"/provisioning-jobs/{r.json()['id']}").json())["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, f"job stayed {job['status']}"
            time.sleep(0.2)
    assert job["status"] == "succeeded", job["error"]
    return dict(job)


def tab_to(ui: Ui, selector: str) -> None:
    """Tab (no mouse) until the element `selector` names has the focus."""
    target = ui.page.locator(selector)
    for _ in range(80):
        if target.count() and target.first.evaluate("el => el === document.activeElement"):
            return
        ui.page.keyboard.press("Tab")
    pytest.fail(f"Tab never reached {selector}")


def check_drift(ui: Ui) -> Any:
    """Tab to "Check for drift" (or "Check again"), Enter: the section is swapped in place with the read."""
    page = ui.page
    page.evaluate("window.__sameDocument = true")
    tab_to(ui, "#drift a#check-drift")
    page.keyboard.press("Enter")
    section = page.locator("section#drift[data-checked=true]")
    expect(section).to_be_visible()
    assert page.evaluate("window.__sameDocument === true"), "the check reloaded the page instead of swapping"
    return section


@pytest.mark.timeout(600)
def test_check_see_confirm_repair_and_check_again_with_the_keyboard(open_ui: Any, served: Served) -> None:
    job = provisioned(served)
    job_id = job["id"]
    vm = job["config"]["infra"]["VMs"][0]
    served.fake.drift = recorded(vm["Name"], vm["ID"], job["config"]["infra"]["VMSecurityGroupID"])

    ui = open_ui()
    page = ui.page
    ui.sign_in(served.tokens["operator"])
    ui.goto(f"/ui/jobs/{job_id}", "job")
    expect(page.locator("section#drift a#check-drift")).to_have_text("Check for drift")
    assert served.fake.reads == [], "the job page read the cloud by itself"
    section = check_drift(ui)
    rows = section.locator("table#drift-resources tr[data-resource]")
    expect(rows).to_have_count(4)
    expect(section.locator(f"tr[data-resource='aws_instance.{vm['Name']}']")).to_have_attribute(
        "data-change", "missing"
    )
    changed = section.locator("tr[data-resource='aws_security_group.vms']")
    expect(changed.locator("li[data-field=ingress]")).to_contain_text('"cidr": "0.0.0.0/0"')
    expect(section.locator("tr[data-repairable=false]")).to_contain_text("reported only")
    ui.seen("job-drift")

    tab_to(ui, "#drift a[data-action=repair]")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/jobs/{job_id}/actions/repair")
    expect(page.locator("form#confirm")).to_be_visible()
    expect(page.locator("#preview li[data-change]")).to_have_count(4)
    expect(page.locator("#preview")).to_contain_text("Plan: 1 to add, 1 to change, 1 to destroy.")
    expect(page.locator("form#confirm a", has_text="Cancel")).to_have_attribute("href", f"/ui/jobs/{job_id}")
    ui.seen("confirm-repair")
    with served.api("viewer") as c:
        assert c.get(f"/provisioning-jobs/{job_id}").json()["config"].get("operation") is None  # not yet

    tab_to(ui, "form#confirm button[type=submit]")
    expect(page.locator("form#confirm button[type=submit]")).to_have_text("Confirm: repair the drift")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_attribute("data-status", "succeeded", timeout=SLOW_MS)
    expect(page.locator("ol#operation-steps li[data-step=stepRepairDrift]")).to_have_attribute(
        "data-status", "succeeded"
    )
    reload_until(ui, lambda: expect(page.locator("#history li", has_text="repair")).to_contain_text("succeeded"))
    assert served.fake.repairs == [job_id]
    ui.seen("job-repaired")

    # What is left is the user's own group: reported, never repaired, so no repair is offered.
    section = check_drift(ui)
    expect(section.locator("tr[data-resource]")).to_have_count(1)
    expect(section.locator("tr[data-resource='aws_security_group.default']")).to_have_attribute(
        "data-repairable", "false"
    )
    expect(section.locator("a[data-action=repair]")).to_have_count(0)
    ui.seen("job-drift-left")

    # A viewer reads the drift and is offered no repair.
    served.fake.drift = recorded(vm["Name"], vm["ID"], "sg-0vms")
    viewer = open_ui()
    viewer.sign_in(served.tokens["viewer"], "jobs-viewer")
    viewer.goto(f"/ui/jobs/{job_id}", "job-viewer")
    section = check_drift(viewer)
    expect(section.locator("tr[data-resource]")).to_have_count(4)
    expect(viewer.page.locator("a[data-action]")).to_have_count(0)
    viewer.seen("job-drift-viewer")

    # Without JavaScript the check is a page of its own, with the same section.
    plain = open_ui(javascript=False)
    plain.sign_in(served.tokens["operator"], "jobs-nojs")
    plain.goto(f"/ui/jobs/{job_id}", "job-nojs")
    plain.page.locator("#drift a#check-drift").click()
    plain.page.wait_for_url(f"**/ui/jobs/{job_id}/drift")
    expect(plain.page.locator("section#drift tr[data-resource]")).to_have_count(4)
    expect(plain.page.locator("section#drift a[data-action=repair]")).to_be_visible()
    plain.seen("drift-nojs")
