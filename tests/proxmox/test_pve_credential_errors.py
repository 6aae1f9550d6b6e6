"""Proxmox VE credentials and endpoints fail in one line through the real CLI (issue 23, item 6): no token, a
wrong secret (fakepve answers 401 as Proxmox VE does), a dead endpoint (a closed 127.0.0.1 port) and an
unresolvable host (`.invalid`, which never resolves). The last two were 115 s of silent retries; a refused
connection or an unknown host is not transient, so they fail at once, naming provider.endpoint's URL."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.credential_failures import FAST, one_error_line, timed
from tests.helpers import free_port
from tests.proxmox.fakecluster import TOKEN_SECRET, Serving, serve, token_env
from tests.proxmox.pve_cli import mutating, pve_cli, write_pve_env


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serve(tmp_path_factory.mktemp("pve-credentials")) as serving:
        yield serving


def _apply(
    tmp_path: Path, env_file: Path, *, token: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    cli = pve_cli(tmp_path, token=token is not None)
    if token is not None:
        cli.token = token
    return timed(lambda: cli.run("apply", "-f", str(env_file), "--yes", timeout=120))


def test_no_token_names_both_variables(fake: Serving, tmp_path: Path) -> None:
    env_file = write_pve_env(tmp_path, fake, "pvc-none")
    proc, _ = _apply(tmp_path, env_file)
    one_error_line(proc, "PROXMOX_TOKEN_ID", "PROXMOX_TOKEN_SECRET")


def test_a_wrong_secret_names_the_variables_and_the_endpoint_never_the_secret(fake: Serving, tmp_path: Path) -> None:
    fake.run(fake.pve.requests.clear)
    wrong = {**token_env(), "PROXMOX_TOKEN_SECRET": "wrong-" + TOKEN_SECRET}
    env_file = write_pve_env(tmp_path, fake, "pvc-wrong")
    proc, _ = _apply(tmp_path, env_file, token=wrong)
    line = one_error_line(
        proc,
        "refused the API token",
        "PROXMOX_TOKEN_ID and PROXMOX_TOKEN_SECRET",
        fake.pve.url,
        secrets=(TOKEN_SECRET,),
    )
    assert "401" in line
    assert mutating(fake) == []  # refused at the first call: nothing was asked to change


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        (f"https://127.0.0.1:{free_port()}", "connection refused"),  # nothing listens there
        ("https://pve.vmplane.invalid:8006", "host name does not resolve"),  # RFC 2606: never resolves
    ],
    ids=["dead-port", "unresolvable"],
)
def test_an_endpoint_nothing_answers_at_fails_fast_naming_it(
    fake: Serving, tmp_path: Path, endpoint: str, why: str
) -> None:
    env_file = write_pve_env(
        tmp_path, fake, "pvc-dead", provider={"cloud": "proxmox", "endpoint": endpoint, "nodes": ["pve1"]}
    )
    proc, elapsed = _apply(tmp_path, env_file, token=token_env())
    one_error_line(proc, f"cannot reach the Proxmox VE API {endpoint}: {why}", secrets=(TOKEN_SECRET,))
    assert elapsed < FAST, f"{elapsed:.1f}s"
    assert "retrying" not in proc.stderr  # not transient: no retry at all
