"""The browser harness: Debian's chromium driven by Playwright, one `Ui` per signed-in user (a browser
context), a screenshot and an accessibility check (axe-core, vendored) of every page a test visits."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.helpers import REPO

CHROMIUM = os.environ.get("VMPLANE_CHROMIUM") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("VMPLANE_ARTIFACTS") or REPO / "artifacts") / "screenshots"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"  # axe-core 4.14.1 (vendor/LICENSE: MPL-2.0)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# How long expect() waits: by default (pages, forms), and for the sandbox's jobs (an apply of web.jsonc
# takes 30-60 s alone, more on 2 cores shared with the rest of the suite).
QUICK_MS = 30_000
SLOW_MS = 240_000


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install chromium, or set VMPLANE_CHROMIUM)"
    return None


@dataclass
class Shots:
    """Where screenshots go, and which pages already have their phone-width one (once per page is enough)."""

    root: Path
    phone_done: set[str] = field(default_factory=set)
    taken: dict[str, int] = field(default_factory=dict)  # by test: numbered per test, a re-run overwrites its own


class Ui:
    """One browser context and page, signed in (or not) as one user. `seen(name)` is called on every page a
    test reaches: it saves the screenshots, runs axe and fails on console errors, page errors or a request
    that left 127.0.0.1."""

    def __init__(self, context: Any, base: str, shots: Shots, test: str, javascript: bool = True) -> None:
        self.context, self.base, self.shots, self.test = context, base, shots, test
        # Without JavaScript, page.evaluate() never returns: no axe nor width check there (the same pages
        # get them in the tests that run with it).
        self.javascript = javascript
        self.page: Any = context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.allowed: list[re.Pattern[str]] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def _console(self, msg: Any) -> None:
        if msg.type == "error" and not any(p.search(msg.text) for p in self.allowed):
            where = msg.location.get("url") or self.page.url
            self.errors.append(f"console error on {self.page.url} (from {where}): {msg.text}")

    def allow_status(self, status: int) -> None:
        """Chromium logs an error status of the document itself ('Failed to load resource: ... status of 401'):
        expected where a test provokes that status."""
        self.allowed.append(re.compile(rf"status of {status}\b"))

    def url(self, path: str) -> str:
        return self.base + path

    def path(self) -> str:
        return urlsplit(self.page.url).path

    def page_name(self) -> str:
        """The current page as a screenshot names it: /ui/jobs/ID/actions/scale -> job-actions-scale."""
        path = re.sub(r"jobs/[^/]+", "job", self.path().removeprefix("/ui/").strip("/"))
        return path.replace("/", "-") or "root"

    def goto(self, path: str, name: str = "") -> Any:
        """Open path (following redirects), and `seen` the page it lands on."""
        response = self.page.goto(self.url(path))
        self.seen(name or self.page_name())
        return response

    def sign_in(self, token: str, name: str = "jobs") -> None:
        self.goto("/ui/sign-in")
        self.page.get_by_label("API token").fill(token)
        self.page.locator("form#sign-in").get_by_role("button", name="Sign in").click()
        self.page.wait_for_url("**/ui/jobs")
        self.seen(name)

    def csrf(self) -> str:
        """The session's CSRF value, as the page gives it to its forms (or to htmx, in a meta tag)."""
        inputs, meta = self.page.locator("input[type=hidden][name=csrf]"), self.page.locator("meta[name=csrf-token]")
        value = inputs.first.get_attribute("value") if inputs.count() else meta.get_attribute("content")
        assert value, f"no csrf value on {self.page.url}"
        return str(value)

    def seen(self, name: str) -> None:
        """Screenshots (1280x800 full page; 390x844 once per distinct page), axe, and the error checks."""
        page = self.page
        page.wait_for_load_state("load")
        self.shots.root.mkdir(parents=True, exist_ok=True)
        n = self.shots.taken[self.test] = self.shots.taken.get(self.test, 0) + 1
        stem = f"{self.test}-{n:02d}-{name}"
        page.screenshot(path=self.shots.root / f"{stem}.png", full_page=True)
        if name not in self.shots.phone_done:
            self.shots.phone_done.add(name)
            page.set_viewport_size(PHONE)
            try:
                page.screenshot(path=self.shots.root / f"{stem}-phone.png", full_page=True)
                # Readable at a phone's width: wide content scrolls inside its own box, not the whole page.
                width = page.evaluate("document.documentElement.scrollWidth") if self.javascript else 0
                assert width <= PHONE["width"], f"{name}: the page is {width}px wide at a {PHONE['width']}px viewport"
            finally:
                page.set_viewport_size(DESKTOP)
        if self.javascript:
            self.check_axe(name)
        self.check_clean()

    def check_axe(self, name: str) -> None:
        # evaluate() runs through the DevTools protocol, which the page's CSP does not govern (a script tag
        # would be an inline script, which it may rightly block).
        from playwright.sync_api import Error

        run = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))"""
        for attempt in (1, 2):
            try:
                if not self.page.evaluate("typeof window.axe !== 'undefined'"):
                    self.page.evaluate(AXE.read_text() + "\n;true")
                result = self.page.evaluate(run)
                break
            except Error:  # a live page swapped the nodes axe was walking: once more, on the new ones
                if attempt == 2:
                    raise
        bad = [v for v in result if v["impact"] in ("serious", "critical")]
        for v in result:
            if v not in bad:
                print(f"axe ({name}, {v['impact']}): {v['id']}: {v['help']} at {v['nodes']}")
        assert not bad, f"axe: serious or critical violations on {name} ({self.page.url}): {bad}"

    def check_clean(self) -> None:
        """Fails on what went wrong since the last check (each problem is reported once)."""
        errors, self.errors = self.errors, []
        assert not errors, "\n".join(errors)
        outside = [u for u in self.requests if urlsplit(u).hostname not in ("127.0.0.1", None)]
        assert not outside, f"requests left 127.0.0.1: {outside}"
