"""The dashboard's whole flow in a real browser, on one sandbox environment: sign in with the keyboard,
create examples/web.jsonc in the wizard, watch its steps finish live, check what a viewer may see and do,
detach and attach the load balancer, destroy."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.browser.harness import SLOW_MS, Ui, missing_browser
from tests.helpers import EXAMPLES, Sandbox
from tests.integration.test_apply_destroy import job_resources
from tests.integration.test_load_balancer import lb_parts

if missing_browser():
    pytest.skip(missing_browser(), allow_module_level=True)

from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.browser]

NAME = "ui-web"  # the example under a name of its own: the sandbox account is shared by the session's tests
DOMAIN = f"{NAME}.sandbox.vmplane.test"
JOB_PATH = re.compile(r"/ui/jobs/([^/?#]+)$")


def web_example() -> str:
    """examples/web.jsonc as a user would paste it (comments and trailing commas included), renamed."""
    text = (EXAMPLES / "web.jsonc").read_text()
    assert '"name": "demo-web"' in text and "web.sandbox.vmplane.test" in text
    return text.replace('"name": "demo-web"', f'"name": "{NAME}"').replace("web.sandbox.vmplane.test", DOMAIN)


def sign_in_with_keyboard(ui: Ui, token: str) -> None:
    """Tab to the token field, type, Tab to "Sign in", Enter: no mouse."""
    page = ui.page
    ui.goto("/ui/sign-in")
    field = page.locator("form#sign-in input[name=token]")
    for _ in range(20):  # it may have the focus already (autofocus)
        if field.evaluate("el => el === document.activeElement"):
            break
        page.keyboard.press("Tab")
    else:
        pytest.fail("Tab never reached the API token field")
    page.keyboard.type(token)
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent || document.activeElement.value || ''")
    assert focused.strip() == "Sign in", f"Tab after the token reached {focused!r}, not the Sign in button"
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/jobs")


def reload_until(ui: Ui, check: Callable[[], None], timeout_s: float = 180) -> None:
    """What the contract does not promise to update live (the LB block, the actions after an operation):
    reload and check again, each check auto-waiting a few seconds, until it holds or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        ui.page.reload()


def action(ui: Ui, job_id: str, name: str) -> Any:
    """Follow the action's link to its confirmation page (seen as confirm-NAME); returns its Confirm button."""
    page = ui.page
    page.locator(f"#actions a[data-action={name}]").click()
    page.wait_for_url(f"**/ui/jobs/{job_id}/actions/{name}")
    expect(page.locator("form#confirm")).to_be_visible()
    ui.seen(f"confirm-{name}")
    confirm = page.locator("form#confirm").get_by_role("button", name=re.compile(r"^Confirm"))
    return confirm


def lb_detached(ui: Ui) -> None:
    dns = ui.page.locator("#load-balancer [data-field=dns-name]")
    if dns.count():
        expect(dns).to_have_text(re.compile(r"^\s*none\s*$", re.I), timeout=3000)
    expect(ui.page.locator("#job-status")).to_have_attribute("data-status", "succeeded", timeout=3000)
    expect(ui.page.locator("#actions a[data-action=attach-lb]")).to_be_visible(timeout=3000)
    expect(ui.page.locator("#actions a[data-action=detach-lb]")).to_have_count(0, timeout=3000)


def lb_attached(ui: Ui) -> None:
    expect(ui.page.locator("#load-balancer [data-field=dns-name]")).to_have_text(
        re.compile(r"^\s*(?!none\b)\S+\.\S+\s*$", re.I), timeout=3000
    )
    expect(ui.page.locator("#job-status")).to_have_attribute("data-status", "succeeded", timeout=3000)
    expect(ui.page.locator("#actions a[data-action=detach-lb]")).to_be_visible(timeout=3000)


def viewer_sees_but_cannot_act(open_ui: Callable[..., Ui], token: str, job_id: str) -> None:
    """A viewer: the jobs list and the job page, no action links, and a POST of an action (with its own
    session and a valid CSRF value) refused with 403."""
    ui = open_ui()
    ui.sign_in(token, "jobs-viewer")
    expect(ui.page.locator(f"table#jobs tbody tr[data-job-id='{job_id}']")).to_be_visible()
    ui.goto(f"/ui/jobs/{job_id}", "job-viewer")
    expect(ui.page.locator("#job-status")).to_have_attribute("data-status", "succeeded")
    expect(ui.page.locator("ol#steps li[data-step]")).to_have_count(11)
    expect(ui.page.locator("a[data-action]")).to_have_count(0)
    csrf = ui.csrf()  # the viewer's own session's
    for name in ("detach-lb", "destroy"):
        r = ui.page.request.post(ui.url(f"/ui/jobs/{job_id}/actions/{name}"), form={"csrf": csrf}, max_redirects=0)
        assert r.status == 403, f"a viewer's POST of {name}: {r.status}"
    # The CSRF value was the right one (so the 403s were the role's): the same value signs the viewer out.
    r = ui.page.request.post(ui.url("/ui/sign-out"), form={"csrf": csrf}, max_redirects=0)
    assert r.status == 303, f"sign-out with the viewer's CSRF value: {r.status}"


@pytest.mark.timeout(600)
def test_sign_in_create_watch_live_detach_attach_destroy(
    open_ui: Callable[..., Ui], dashboard: Any, sandbox: Sandbox
) -> None:
    ui = open_ui()
    page = ui.page
    sign_in_with_keyboard(ui, dashboard.tokens["admin"])
    expect(page.locator("table#jobs")).to_be_visible()
    ui.seen("jobs")

    # The wizard: paste, Check, the plan and its cost, Apply on the sandbox.
    page.locator("nav").get_by_role("link", name="New environment").click()
    page.wait_for_url("**/ui/new")
    ui.seen("new")
    page.locator("form#new-env textarea[name=spec]").fill(web_example())
    page.locator("form#new-env").get_by_role("button", name=re.compile(r"^Check")).click()
    expect(page.locator("#plan")).to_be_visible()
    expect(page.locator("#plan")).to_contain_text("stepCreateLoadBalancer")
    expect(page.locator("#cost")).to_contain_text(re.compile(r"\d"))
    expect(page.locator("ul#errors li")).to_have_count(0)
    ui.seen("new-plan")
    page.locator("form#apply input[type=checkbox][name=sandbox]").check()
    page.locator("form#apply").get_by_role("button", name="Apply").click()
    page.wait_for_url(JOB_PATH)
    match = JOB_PATH.search(ui.path())
    assert match
    job_id = match.group(1)

    # Live: the steps reach `succeeded` on this very page, fed by its event stream, with no reload.
    status = page.locator("#job-status")
    first = status.get_attribute("data-status")
    assert first in ("pending", "running"), f"the job was already {first} when its page loaded"
    steps = page.locator("ol#steps li[data-step]")
    waiting = [li.get_attribute("data-step") for li in steps.all() if li.get_attribute("data-status") != "succeeded"]
    assert waiting, "every step had succeeded when the job page loaded"
    page.evaluate("window.__sameDocument = true")
    ui.seen("job-running")
    expect(status).to_have_attribute("data-status", "succeeded", timeout=SLOW_MS)
    expect(steps).to_have_count(11)
    expect(page.locator("ol#steps li[data-step]:not([data-status=succeeded])")).to_have_count(0)
    for name in waiting:  # each shows its duration, API calls and log (folded)
        step = page.locator(f"ol#steps li[data-step={name}]")
        expect(step).to_contain_text(re.compile(r"\d+ API call"))
        expect(step).to_contain_text(re.compile(r"\d(\.\d+)? ?(ms|s|min)\b"))
        expect(step.locator("details pre")).to_be_hidden()
    validate = page.locator("ol#steps li[data-step=stepValidate] details")
    validate.locator("summary").click()
    expect(validate.locator("pre")).to_be_visible()
    assert page.evaluate("window.__sameDocument === true"), "the job page reloaded to show the progress"
    assert any(u.endswith(f"/ui/jobs/{job_id}/events") for u in ui.requests), "no request to the job's event stream"
    ui.seen("job-succeeded")

    # What the finished job shows (read once more from the server: the VMs need not arrive live).
    page.reload()
    vms = page.locator("table#vms tr[data-vm]")
    expect(vms).to_have_count(2)  # the ASG's desired size
    for i in range(2):
        expect(vms.nth(i)).to_contain_text(re.compile(r"10\.42\.\d+\.\d+"))
        expect(vms.nth(i)).to_contain_text(re.compile(r"us-east-1[a-z]"))
    lb_attached(ui)
    expect(page.locator("#cost")).to_contain_text(re.compile(r"\d"))
    for block in ("#outdated", "#history"):
        expect(page.locator(block)).to_be_attached()
    expect(page.locator("#actions a[data-action=destroy]")).to_be_visible()
    ui.seen("job")

    viewer_sees_but_cannot_act(open_ui, dashboard.tokens["viewer"], job_id)

    action(ui, job_id, "detach-lb").click()
    page.wait_for_url(f"**/ui/jobs/{job_id}")
    reload_until(ui, lambda: lb_detached(ui))
    assert not any(lb_parts(sandbox, job_id, DOMAIN).values()), "the sandbox still has the load balancer"
    ui.seen("job-detached")

    confirm = action(ui, job_id, "attach-lb")
    expect(page.locator("form#confirm textarea[name=load_balancer]")).to_contain_text(DOMAIN)  # prefilled
    confirm.click()
    page.wait_for_url(f"**/ui/jobs/{job_id}")
    reload_until(ui, lambda: lb_attached(ui))
    assert lb_parts(sandbox, job_id, DOMAIN)["lbs"], "the sandbox has no load balancer again"
    ui.seen("job-attached")
    expect(page.locator("#history")).to_contain_text(re.compile(r"detach", re.I))

    action(ui, job_id, "destroy").click()
    page.wait_for_url(f"**/ui/jobs/{job_id}")
    reload_until(
        ui, lambda: expect(status).to_have_attribute("data-status", "deleted", timeout=5000), timeout_s=SLOW_MS / 1000
    )
    ui.seen("job-deleted")
    assert not any(job_resources(sandbox, job_id).values()), "the destroyed job left tagged resources"
