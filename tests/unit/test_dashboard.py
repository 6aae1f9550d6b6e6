"""The dashboard's sign-in, session cookie, CSRF and role checks, against a temp store (no workflow runs).

Pages are read with the stdlib's html.parser (`Page`), by the ids and attributes of the UI contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from vmplane.dashboard import create_server
from vmplane.jobs.tokens import Role, issue_token, revoke_token
from vmplane.settings import Settings

VOID = {"meta", "link", "input", "br", "img", "hr", "source", "col", "area", "base", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # its own text and its children's, in order

    @property
    def text(self) -> str:
        return " ".join(self.raw.split())

    @property
    def raw(self) -> str:
        return "".join(self.parts)

    def iter(self) -> list[Element]:
        out = [self]
        for c in self.children:
            out.extend(c.iter())
        return out

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        """Descendants by tag and attributes (`data_step="x"` is `data-step`; None: present at all)."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [
            e
            for e in self.iter()[1:]
            if (tag is None or e.tag == tag)
            and all(k in e.attrs and (v is None or e.attrs[k] == v) for k, v in want.items())
        ]

    def one(self, tag: str | None = None, **attrs: str | None) -> Element:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag or '*'} {attrs}>"
        return found[0]


class Page(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self._stack = [self.root]
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs})
        self._stack[-1].children.append(el)
        if tag not in VOID:
            self._stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, 0, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return

    def handle_data(self, data: str) -> None:
        for el in self._stack:
            el.parts.append(data)

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        return self.root.find_all(tag, **attrs)

    def one(self, tag: str | None = None, **attrs: str | None) -> Element:
        return self.root.one(tag, **attrs)

    def csrf(self, form_id: str) -> str:
        return self.one("form", id=form_id).one("input", name="csrf", type="hidden").attrs["value"]


@dataclass
class Dash:
    settings: Settings
    client: TestClient

    def token(self, org: str = "acme", role: Role = Role.admin) -> str:
        return issue_token(self.settings, org, role).token

    def sign_in(self, token: str, client: TestClient | None = None) -> TestClient:
        c = client or self.client
        form = Page(c.get("/ui/sign-in").text)
        r = c.post("/ui/sign-in", data={"token": token, "csrf": form.csrf("sign-in")}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/jobs", r.text
        return c

    def fresh_client(self, base_url: str = "http://testserver") -> TestClient:
        return TestClient(self.client.app, base_url=base_url)


def make_dash(home: Path) -> Dash:
    settings = Settings(home=home)
    return Dash(settings, TestClient(create_server(settings, run_workflows=False)))


@pytest.fixture
def dash(tmp_path: Path) -> Dash:
    return make_dash(tmp_path)


def test_signed_out_pages_redirect_to_sign_in(dash: Dash) -> None:
    for path in ("/", "/ui/jobs", "/ui/jobs/job-x", "/ui/new", "/ui/jobs/job-x/actions/destroy"):
        r = dash.client.get(path, follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (303, "/ui/sign-in"), path
    page = Page(dash.client.get("/ui/sign-in").text)
    form = page.one("form", id="sign-in")
    token_input = form.one("input", name="token")
    assert page.one("label", **{"for": token_input.attrs["id"]}).text == "API token"
    assert form.one("button").text == "Sign in"
    assert [a.text for a in page.one("nav").find_all("a")] == ["Jobs", "New environment", "Sign out"]


def test_sign_in_sets_an_opaque_strict_http_only_cookie_and_sign_out_ends_the_session(
    dash: Dash, caplog: pytest.LogCaptureFixture
) -> None:
    issued = issue_token(dash.settings, "acme", Role.admin)
    token = issued.token
    with caplog.at_level("INFO", logger="vmplane"):
        c = dash.sign_in(token)
    assert issued.id in caplog.text and token not in caplog.text  # the log names the token's id only
    cookie = next(h for h in c.cookies.jar if h.name == "vmplane_session")
    assert cookie.value and token not in cookie.value and cookie.path == "/" and not cookie.secure
    header = next(v for k, v in dash.client.get("/ui/sign-in").headers.multi_items() if k == "set-cookie")
    assert "HttpOnly" in header and "SameSite=strict" in header
    jobs_page = c.get("/ui/jobs")
    assert jobs_page.status_code == 200 and token not in jobs_page.text
    assert c.get("/", follow_redirects=False).headers["location"] == "/ui/jobs"

    stolen = cookie.value
    csrf = Page(jobs_page.text).one("meta", name="csrf-token").attrs["content"]
    r = c.post("/ui/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/ui/sign-in")
    assert 'vmplane_session=""' in r.headers["set-cookie"]
    # The session is gone on the server: replaying the old cookie signs nobody in.
    replay = dash.fresh_client()
    replay.cookies.set("vmplane_session", stolen)
    assert replay.get("/ui/jobs", follow_redirects=False).headers["location"] == "/ui/sign-in"


def test_the_cookie_is_secure_over_https(dash: Dash) -> None:
    c = dash.fresh_client("https://testserver")
    form = Page(c.get("/ui/sign-in").text)
    r = c.post("/ui/sign-in", data={"token": dash.token(), "csrf": form.csrf("sign-in")}, follow_redirects=False)
    assert r.status_code == 303
    session_header = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and "vmplane_session=" in v)
    assert "Secure" in session_header and "HttpOnly" in session_header


def test_a_bad_token_gets_401_with_an_alert(dash: Dash) -> None:
    form = Page(dash.client.get("/ui/sign-in").text)
    r = dash.client.post("/ui/sign-in", data={"token": "vmp_not-a-token", "csrf": form.csrf("sign-in")})
    assert r.status_code == 401
    assert "not valid" in Page(r.text).one(role="alert").text
    assert "vmplane_session" not in dash.client.cookies


def test_a_revoked_token_signs_the_session_out_at_once(dash: Dash) -> None:
    issued = issue_token(dash.settings, "acme", Role.operator)
    c = dash.sign_in(issued.token)
    assert c.get("/ui/jobs").status_code == 200
    assert revoke_token(dash.settings, issued.id, "acme")
    assert c.get("/ui/jobs", follow_redirects=False).headers["location"] == "/ui/sign-in"


def test_posts_without_the_right_csrf_token_are_refused(dash: Dash) -> None:
    # Sign-in itself: the double-submit cookie must match the form's field.
    dash.client.get("/ui/sign-in")
    r = dash.client.post("/ui/sign-in", data={"token": dash.token(), "csrf": "forged"})
    assert r.status_code == 403 and "vmplane_session" not in dash.client.cookies
    c = dash.sign_in(dash.token())
    for path, data in (("/ui/sign-out", {}), ("/ui/new/check", {"spec": "{}", "csrf": "forged"})):
        r = c.post(path, data=data)
        assert r.status_code == 403, path
        assert "security token" in Page(r.text).one(role="alert").text
    # Still signed in: a refused sign-out did not sign out.
    assert c.get("/ui/jobs").status_code == 200


def test_a_viewer_may_not_open_the_wizard(dash: Dash) -> None:
    c = dash.sign_in(dash.token(role=Role.viewer))
    r = c.get("/ui/new")
    assert r.status_code == 403 and "operator" in Page(r.text).one(role="alert").text


def test_pages_carry_the_security_headers_and_the_api_document_has_no_dashboard_route(dash: Dash) -> None:
    r = dash.client.get("/ui/sign-in")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"
    page = Page(r.text)
    assert all(s.attrs.get("src", "").startswith("/ui/static/") for s in page.find_all("script"))
    assert not [s for s in page.find_all("script") if s.text]  # no inline script
    for s in page.find_all("script"):
        assert dash.client.get(s.attrs["src"]).status_code == 200
    paths = dash.client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p == "/" or p.startswith("/ui")]
    assert "content-security-policy" not in dash.client.get("/healthz").headers


def test_an_unknown_dashboard_page_is_an_html_404(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    r = c.get("/ui/no-such-page")
    assert r.status_code == 404 and "/ui/no-such-page" in Page(r.text).one(role="alert").text
    assert c.get("/ui/static/app.css").status_code == 200


def test_htmx_sign_out_sends_the_csrf_header_and_is_told_where_to_go(dash: Dash) -> None:
    c = dash.sign_in(dash.token())
    csrf = Page(c.get("/ui/jobs").text).one("meta", name="csrf-token").attrs["content"]
    assert c.post("/ui/sign-out", headers={"HX-Request": "true"}).status_code == 403  # no header, no sign-out
    r = c.post("/ui/sign-out", headers={"HX-Request": "true", "X-CSRF-Token": csrf})
    assert (r.status_code, r.headers["hx-redirect"]) == (204, "/ui/sign-in")
    assert c.get("/ui/jobs", follow_redirects=False).headers["location"] == "/ui/sign-in"
