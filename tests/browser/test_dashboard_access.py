"""The dashboard's gates in a real browser: a wizard given a broken file creates nothing and says where
each error is; a bad token is refused with an alert; signing out leaves the pages unreachable."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.browser.harness import Ui, missing_browser
from tests.helpers import EXAMPLES

if missing_browser():
    pytest.skip(missing_browser(), allow_module_level=True)

from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.browser]


def job_ids(ui: Ui) -> set[str]:
    ui.goto("/ui/jobs")
    expect(ui.page.locator("table#jobs")).to_be_visible()
    return {str(r.get_attribute("data-job-id")) for r in ui.page.locator("table#jobs tbody tr[data-job-id]").all()}


def position(text: str, needle: str) -> str:
    """line:col (1-based) of needle in text."""
    before = text[: text.index(needle)]
    return f"{before.count(chr(10)) + 1}:{len(before) - before.rfind(chr(10))}"


def test_a_broken_file_shows_each_error_at_line_col_and_creates_no_job(
    open_ui: Callable[..., Ui], dashboard: Any, tmp_path: Path
) -> None:
    ui = open_ui()
    ui.allow_status(422)  # the answer to a check that found errors
    ui.sign_in(dashboard.tokens["operator"])
    before = job_ids(ui)
    text = (
        (EXAMPLES / "web.jsonc")
        .read_text()
        .replace('"name": "demo-web"', '"name": "Bad_Name!"')
        .replace('"diskGb": 20', '"diskGb": "twenty"')
    )
    broken = tmp_path / "broken.jsonc"
    broken.write_text(text)

    ui.goto("/ui/new")
    ui.page.locator("form#new-env input[type=file][name=file]").set_input_files(broken)  # the upload path
    ui.page.locator("form#new-env").get_by_role("button", name=re.compile(r"^Check")).click()
    errors = ui.page.locator("ul#errors li")
    expect(errors).to_have_count(2)
    expect(errors.filter(has_text=position(text, '"Bad_Name!"'))).to_contain_text("name")
    expect(errors.filter(has_text=position(text, '"twenty"'))).to_contain_text("pools.web.diskGb")
    expect(ui.page.locator("form#apply")).to_have_count(0)
    ui.seen("new-errors")
    assert job_ids(ui) == before, "a broken file created a job"


def test_a_bad_token_is_refused_and_signing_out_closes_the_pages(open_ui: Callable[..., Ui], dashboard: Any) -> None:
    ui = open_ui()
    page = ui.page
    ui.allow_status(401)
    for path in ("/", "/ui/jobs", "/ui/new"):  # not signed in: every page leads to the sign-in
        ui.goto(path)
        assert ui.path() == "/ui/sign-in", f"{path} led to {ui.path()}"

    page.get_by_label("API token").fill("vmp_not-a-token")
    with page.expect_response(lambda r: r.url.endswith("/ui/sign-in") and r.request.method == "POST") as sent:
        page.locator("form#sign-in").get_by_role("button", name="Sign in").click()
    assert sent.value.status == 401
    expect(page.locator("[role=alert]")).to_be_visible()
    expect(page.locator("[role=alert]")).not_to_contain_text("vmp_not-a-token")
    assert not [c for c in ui.context.cookies() if c["name"] == "vmplane_session"]
    ui.seen("sign-in-refused")

    token = dashboard.tokens["operator"]
    ui.sign_in(token)
    [cookie] = [c for c in ui.context.cookies() if c["name"] == "vmplane_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert token not in cookie["value"] and token not in page.content()
    ui.goto("/")
    assert ui.path() == "/ui/jobs"

    page.locator("nav").get_by_text("Sign out", exact=True).click()
    page.wait_for_url("**/ui/sign-in")
    assert not [c for c in ui.context.cookies() if c["name"] == "vmplane_session"]
    for path in ("/", "/ui/jobs", "/ui/new"):
        ui.goto(path)
        assert ui.path() == "/ui/sign-in", f"after signing out, {path} led to {ui.path()}"
    # The old cookie, replayed, opens nothing either: signing out ends the session on the server.
    ui.context.add_cookies([cookie])
    ui.goto("/ui/jobs")
    assert ui.path() == "/ui/sign-in", "a signed-out session's cookie still opens the jobs list"


def test_without_javascript_the_pages_and_forms_still_work(open_ui: Callable[..., Ui], dashboard: Any) -> None:
    """htmx and the event stream only enhance: sign-in, the nav, the jobs filter and sign-out are plain
    links and forms."""
    ui = open_ui(javascript=False)
    page = ui.page
    ui.sign_in(dashboard.tokens["operator"], "jobs-no-js")
    page.locator("form#job-filter select[name=status]").select_option("succeeded")
    page.locator("form#job-filter").get_by_role("button", name="Filter").click()
    page.wait_for_url("**/ui/jobs?status=succeeded")
    expect(page.locator("form#job-filter select[name=status]")).to_have_value("succeeded")
    for cell in page.locator("table#jobs tbody tr[data-job-id] [data-field=status]").all():
        expect(cell).to_have_text("succeeded")
    page.locator("nav").get_by_role("link", name="New environment").click()
    page.wait_for_url("**/ui/new")
    expect(page.locator("form#new-env textarea[name=spec]")).to_be_visible()
    page.locator("nav").get_by_role("link", name="Sign out").click()  # without htmx: a page with the form
    page.wait_for_url("**/ui/sign-out")
    ui.seen("sign-out-no-js")
    page.locator("form#sign-out").get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/ui/sign-in")
    ui.goto("/ui/jobs", "sign-in-no-js")
    assert ui.path() == "/ui/sign-in"
