"""Secret references through the API and the dashboard: `POST /provisioning-jobs` takes them and its OpenAPI
schema says so, the job's GET and the job page show the reference (`🔒 aws-sm:prod/db#password`), the
wizard shows validate's warnings, and a plain value named like a secret is masked on every page (it stays
plain in the record: the user wrote it so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vmplane.jobs.tokens import Role

from .test_dashboard import Dash, Page
from .test_dashboard_jobs import apply, check, dash

__all__ = ["dash"]  # the fixture, shared with the wizard's tests

FIXED = Path(__file__).resolve().parents[2] / "examples" / "fixed.jsonc"
PLAIN = "plain-token-4c1d9e"  # a plain value under a secret-like name: masked on the pages
RUNTIME = {
    "env": {
        "LOG_LEVEL": "info",
        "DB_PASSWORD": {"secret": "aws-sm:prod/db#password"},
        "API_TOKEN": PLAIN,
    },
    "files": {
        "/etc/app/tls.pem": {"secret": "aws-ssm:/prod/app/tls:3"},
        "/etc/app/app.conf": "workers=4\n",
    },
}


def fixed_text(name: str = "demo-fixed") -> str:
    text = FIXED.read_text().replace('"env": { "LOG_LEVEL": "info" },', json.dumps(RUNTIME)[1:-1] + ",")
    return text.replace('"name": "demo-fixed"', f'"name": "{name}"')


def runtime_cells(page: Page) -> dict[str, tuple[str, str]]:
    """Each runtime row of the page: its field path -> (how the value is shown, the cell's text)."""
    rows = page.one("table", id="runtime-values").find_all("tr", data_kind=None)
    return {r.one("th").text: (r.find_all("td")[0].attrs["data-field"], r.find_all("td")[0].text) for r in rows}


def test_the_wizard_shows_references_warns_of_plain_secret_like_values_and_masks_them(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.operator))
    text = fixed_text()
    r = check(c, text)
    assert r.status_code == 200, r.text
    page = Page(r.text)
    (warning,) = page.one("ul", id="warnings").find_all("li")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if PLAIN in row)
    assert warning.text.startswith(f"{line}:") and "runtime.env.API_TOKEN" in warning.text
    assert 'use {"secret": "aws-sm:NAME[#json-key]"}' in warning.text
    cells = runtime_cells(page)
    assert cells["runtime.env.DB_PASSWORD"] == ("secret", "🔒 aws-sm:prod/db#password")
    assert cells['runtime.files["/etc/app/tls.pem"]'] == ("secret", "🔒 aws-ssm:/prod/app/tls:3")
    assert cells["runtime.env.API_TOKEN"][0] == "masked"
    assert cells["runtime.env.LOG_LEVEL"] == ("plain", "info")
    assert cells['runtime.files["/etc/app/app.conf"]'] == ("file", "10 bytes (plain text)")
    # The plain value is only where the user put it: the file being edited (its text area, the apply form's copy).
    result = page.one("section", id="result")
    assert PLAIN not in result.one(id="runtime").raw and PLAIN not in result.one("ul", id="warnings").raw


def test_the_job_page_and_the_api_show_references_never_a_value(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.operator))
    job_id = apply(dash, c, fixed_text())
    html = c.get(f"/ui/jobs/{job_id}").text
    cells = runtime_cells(Page(html))
    assert cells["runtime.env.DB_PASSWORD"] == ("secret", "🔒 aws-sm:prod/db#password")
    assert cells["runtime.env.API_TOKEN"][0] == "masked"
    assert PLAIN not in html and "workers=4" not in html

    # The API answers the record as written: the reference, and the user's plain value (theirs to fix).
    api = {"Authorization": f"Bearer {dash.token(role=Role.operator)}"}
    job = dash.client.get(f"/provisioning-jobs/{job_id}", headers=api).json()
    env = job["config"]["spec"]["runtime"]["env"]
    assert env["DB_PASSWORD"] == {"secret": "aws-sm:prod/db#password"} and env["API_TOKEN"] == PLAIN
    assert job["config"]["spec"]["runtime"]["files"]["/etc/app/tls.pem"] == {"secret": "aws-ssm:/prod/app/tls:3"}


def test_the_api_takes_references_and_its_openapi_schema_says_so(dash: Dash) -> None:
    api = {"Authorization": f"Bearer {dash.token(role=Role.operator)}"}
    doc: dict[str, Any] = {**json.loads(_plain_json(fixed_text("api-secrets")))}
    r = dash.client.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc, headers=api)
    assert r.status_code == 201, r.text
    assert r.json()["config"]["spec"]["runtime"]["env"]["DB_PASSWORD"] == {"secret": "aws-sm:prod/db#password"}
    bad = {**doc, "name": "api-bad", "runtime": {"env": {"DB_PASSWORD": {"secret": "env:DB_PASSWORD"}}}}
    r = dash.client.post("/provisioning-jobs", params={"sandbox": "true"}, json=bad, headers=api)
    assert r.status_code == 422 and "env: is not a secret store on aws" in r.text

    openapi = dash.client.get("/openapi.json").json()
    secret = openapi["components"]["schemas"]["Secret"]
    assert secret["required"] == ["secret"] and secret["properties"]["secret"]["pattern"].startswith("^(aws-sm|")
    assert "Only the reference is ever stored" in secret["properties"]["secret"]["description"]
    env = openapi["components"]["schemas"]["Runtime"]["properties"]["env"]
    assert {"$ref": "#/components/schemas/Secret"} in env["additionalProperties"]["oneOf"]


def _plain_json(text: str) -> str:
    from vmplane.envspec.jsonc import parse_jsonc

    value, _ = parse_jsonc(text)
    value.pop("$schema", None)
    return json.dumps(value)


def test_what_the_cloud_says_of_a_secret_is_shown_at_its_reference(dash: Dash, monkeypatch: Any) -> None:
    """A missing or unreadable secret (the driver's precheck, exit 2 on the CLI) is an error at the
    reference's value in the pasted file, and nothing is recorded."""
    from vmplane.jobs import precheck

    said = "runtime.env.DB_PASSWORD.secret: aws-sm:prod/db#password: no such secret in us-east-1"
    monkeypatch.setattr(precheck, "problems", lambda *_a: [said])
    c = dash.sign_in(dash.token(role=Role.operator))
    text = fixed_text()
    r = check(c, text)
    assert r.status_code == 422
    (error,) = Page(r.text).one("ul", id="errors").find_all("li")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "aws-sm:prod/db#password" in row)
    col = text.splitlines()[line - 1].index('"aws-sm:prod/db#password"') + 1
    assert error.text.startswith(f"{line}:{col} ") and "no such secret" in error.text, error.text
    assert not Page(r.text).find_all("form", id="apply")
