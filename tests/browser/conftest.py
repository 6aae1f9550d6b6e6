"""Fixtures of the browser tests: one real `vmplane serve` (SQLite store, its own VMPLANE_HOME, the session's
sandbox) with a token per role, one headless chromium, and a `Ui` per signed-in user."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.browser.harness import ARTIFACTS, CHROMIUM, DESKTOP, QUICK_MS, Shots, Ui, missing_browser
from tests.helpers import Cli, Sandbox, vmplane_serve

ORG = "acme"  # examples/web.jsonc's org


@dataclass
class Dashboard:
    url: str
    tokens: dict[str, str]  # role -> token of ORG
    cli: Cli
    log: Path


@pytest.fixture(scope="session")
def dashboard(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    home = tmp_path_factory.mktemp("dashboard-home")
    cli = Cli(home=home, sandbox_port=sandbox.port)
    log = home / "serve.log"
    with vmplane_serve(cli, log) as url:
        tokens = {
            role: cli.json("tokens", "create", "--org", ORG, "--role", role)["token"]
            for role in ("viewer", "operator", "admin")
        }
        yield Dashboard(url, tokens, cli, log)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = missing_browser()
    if why:
        pytest.skip(why)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=QUICK_MS)
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's own sandbox refuses to start.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="session")
def shots() -> Shots:
    return Shots(ARTIFACTS)


@pytest.fixture
def open_ui(
    browser: Any, dashboard: Dashboard, shots: Shots, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Ui]]:
    """A factory of Uis (a fresh browser context each: its own cookies; `javascript=False` for one with
    JavaScript off); each is checked for console errors once more and closed when the test ends."""
    test = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name.removeprefix("test_"))
    opened: list[Ui] = []

    def make(javascript: bool = True) -> Ui:
        context = browser.new_context(viewport=DESKTOP, java_script_enabled=javascript)
        ui = Ui(context, dashboard.url, shots, test, javascript)
        ui.page.set_default_timeout(60_000)
        opened.append(ui)
        return ui

    yield make
    for ui in opened:
        ui.context.close()
    for ui in opened:
        ui.check_clean()
