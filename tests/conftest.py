"""Shared fixtures: a sandbox per test session (moto's server, started through vmplane itself on a
free 127.0.0.1 port) and an isolated VMPLANE_HOME per test for the real `vmplane` CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, free_port


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    from vmplane.sandbox import control
    from vmplane.settings import Settings

    home = tmp_path_factory.mktemp("sandbox-home")
    settings = Settings(home=home, sandbox_port=free_port())
    info = control.start(settings)
    yield Sandbox(port=info.port, home=home)
    control.stop(settings)


@pytest.fixture
def cli(tmp_path: Path, sandbox: Sandbox) -> Cli:
    return Cli(home=tmp_path / "home", sandbox_port=sandbox.port)
