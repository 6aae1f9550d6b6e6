"""Shared fixtures: a sandbox per test session (moto's server and the Google Cloud sandbox, started
through vmplane itself on two free 127.0.0.1 ports) and an isolated VMPLANE_HOME per test for the real `vmplane` CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import SESSION_GCP_PORTS, Cli, Sandbox, free_port, terraform_env


def _start_rank(item: pytest.Item) -> int:
    slow = item.get_closest_marker("slow")
    if slow is None:
        return 2
    return 0 if slow.kwargs.get("first") else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: xdist starts the tests in this order, so the slow ones (marked `slow`, the longest
    with first=True) run while the quick ones are left to fill the end, and no worker finishes a long
    test alone. The sort is stable: otherwise the collection order (and module grouping) stays."""
    items.sort(key=_start_rank)


@pytest.fixture(autouse=True)
def _no_vmplane_log_handler_left() -> Iterator[None]:
    """A CLI command run in this process (typer's CliRunner) points vmplane's loggers, DBOS's among them,
    at the runner's stderr, which is closed when it returns. Taken off after each test: otherwise a later
    in-process server in the same worker fails to start (DBOS() flushes its logger's handlers)."""
    yield
    from vmplane.observe import logs

    logs.reset()


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    from vmplane.sandbox import control
    from vmplane.settings import Settings

    home = tmp_path_factory.mktemp("sandbox-home")
    settings = Settings(home=home, sandbox_port=free_port(), gcp_sandbox_port=free_port())
    info = control.start(settings)
    SESSION_GCP_PORTS[info.port] = settings.gcp_sandbox_port
    yield Sandbox(port=info.port, home=home, gcp_port=settings.gcp_sandbox_port)
    control.stop(settings)


FAULT_PROFILE = Path(__file__).parent / "fixtures" / "faults" / "ci.jsonc"
SWEEP_FAULT_PROFILE = FAULT_PROFILE.with_name("sweep.jsonc")


def _sandbox_with(profile: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    from vmplane.sandbox import control
    from vmplane.settings import Settings

    home = tmp_path_factory.mktemp(f"sandbox-{profile.stem}-home")
    settings = Settings(home=home, sandbox_port=free_port(), gcp_sandbox_port=free_port())
    info = control.start(settings, profile)
    SESSION_GCP_PORTS[info.port] = settings.gcp_sandbox_port
    yield Sandbox(port=info.port, home=home, gcp_port=settings.gcp_sandbox_port)
    control.stop(settings)


@pytest.fixture(scope="session")
def faulty_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A second sandbox, started under tests/fixtures/faults/ci.jsonc (every fault on, seed fixed): for the
    lifecycles that must survive what the real clouds send. `Cli(home, faulty_sandbox.port)`."""
    yield from _sandbox_with(FAULT_PROFILE, tmp_path_factory)


@pytest.fixture(scope="session")
def sweep_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """The crash sweeps' sandbox, under tests/fixtures/faults/sweep.jsonc (the same fault kinds at rates
    ~30 killed-and-resumed cases can afford): a sweep module takes it as its `sandbox`."""
    yield from _sandbox_with(SWEEP_FAULT_PROFILE, tmp_path_factory)


@pytest.fixture
def cli(tmp_path: Path, sandbox: Sandbox) -> Cli:
    return Cli(home=tmp_path / "home", sandbox_port=sandbox.port, gcp_port=sandbox.gcp_port)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway PostgreSQL 15 database for this test session (skips with the reason where impossible)."""
    import subprocess

    from tests.helpers import start_postgres

    url, stop = start_postgres(tmp_path_factory.mktemp("postgres"))
    if url is None:
        pytest.skip(str(stop))
    yield url
    subprocess.run(stop, capture_output=True, check=False)


@pytest.fixture
def tf_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running terraform against this machine's provider mirror (skips without one)."""
    env, why = terraform_env(tmp_path)
    if env is None:
        pytest.skip(why)
    return env
