"""tests/forkserver.py: a forked `vmplane` behaves as `python -m vmplane` started by subprocess."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests import forkserver
from tests.helpers import EXAMPLES, Cli, free_port

pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="the fork server is off (VMPLANE_TEST_FORK=0)")


def _plain(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vmplane", *args],
        env=cli.env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("validate", "-f", str(EXAMPLES / "gcp-web.jsonc")),
        ("validate", "-f", "/nonexistent/env.jsonc"),  # exit 2, the error on stderr
        ("status", "no-such-job", "-o", "json"),
        ("init", "--name", "x", "--org", "acme"),  # writes into the working directory
    ],
)
def test_a_forked_command_prints_and_exits_as_a_started_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    cli = Cli(home=tmp_path / "home", sandbox_port=1, gcp_port=2)
    results = []
    for where in ("plain", "forked"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        results.append(_plain(cli, *args) if where == "plain" else forkserver.run(list(args), cli.env, 120))
        assert sorted(p.name for p in (tmp_path / where).iterdir()) == sorted(
            p.name for p in (tmp_path / "plain").iterdir()
        )
    plain, forked = results
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_a_forked_command_sees_only_its_environment_and_dies_of_kill_9(tmp_path: Path) -> None:
    cli = Cli(home=tmp_path / "home", sandbox_port=1, gcp_port=2)
    env = {**cli.env, "VMPLANE_LOG_FORMAT": "nonsense"}
    bad = forkserver.run(["validate", "-f", str(EXAMPLES / "gcp-web.jsonc")], env, 120)
    assert bad.returncode == 2 and "nonsense" in bad.stderr  # VMPLANE_LOG_FORMAT reached the command
    proc = forkserver.popen(["serve", "--port", str(free_port())], cli.env)  # runs until stopped
    assert proc.pid != os.getpid() and proc.poll() is None
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


# What a module may not do at import (its body, outside any function or class method) once the fork server
# has imported it for every later command: read the environment, the working directory or the clock.
_IMPORT_TIME_READS = {"environ", "getenv", "getcwd", "cwd", "home", "expanduser", "getpid", "time", "monotonic", "now"}


def _import_time_reads(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue  # runs when called, in the command's own process
            if isinstance(child, ast.Attribute) and child.attr in _IMPORT_TIME_READS:
                found.append((child.lineno, ast.unparse(child)))
            visit(child)

    visit(tree)
    return found


def test_no_preloaded_vmplane_module_reads_the_environment_when_imported() -> None:
    """The fork server imports vmplane once (forkserver.VMPLANE_PRELOAD) and forks every command from it,
    so a value read at import would be the server's, not the command's: `deps/http.py` read
    VMPLANE_DEPS_ATTEMPTS so, and a command run with it set would have kept the default."""
    import importlib
    import sys

    for name in forkserver.VMPLANE_PRELOAD:
        importlib.import_module(name)
    modules = [m for n, m in sys.modules.items() if n.startswith("vmplane") and getattr(m, "__file__", None)]
    assert len(modules) > 100  # the preload's imports are the ones checked
    bad = [
        f"{m.__name__}:{line} {what}"
        for m in modules
        for line, what in _import_time_reads(ast.parse(Path(m.__file__).read_text()))  # type: ignore[arg-type]
    ]
    assert not bad, bad
