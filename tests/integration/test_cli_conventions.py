"""CLI conventions: -f defaults to ./vmplane.env.jsonc, -o is always --output, directories are -d/--dir."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests import deps_servers
from tests.helpers import EXAMPLES, Cli, Sandbox


@pytest.fixture
def c(tmp_path: Path) -> Cli:
    return Cli(home=tmp_path / "h", sandbox_port=1)


def run_in(c: Cli, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vmplane", *args],
        cwd=cwd,
        env={**c.env, **(env or {})},
        text=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def test_default_file_is_used_when_present(sandbox: Sandbox, tmp_path: Path) -> None:
    # `plan` asks the cloud what stepValidate would refuse: here the session's sandbox.
    c = Cli(home=tmp_path / "h", sandbox_port=sandbox.port)
    stack = tmp_path / "stack"
    stack.mkdir()
    shutil.copy(EXAMPLES / "fixed.jsonc", stack / "vmplane.env.jsonc")
    proc = run_in(c, stack, "validate", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "file": "vmplane.env.jsonc",
        "valid": True,
        "name": "demo-fixed",
        "org": "acme",
        "warnings": [],  # the shipped example keeps no secret-like value in plain text
    }
    assert "Plan: 18 to add" in run_in(c, stack, "plan", "--sandbox").stdout
    # A real stack first pins what the shipped manifests leave open: from the fake upstreams.
    with deps_servers.serve("amd64") as upstream:
        mirrors = {"VMPLANE_DEPS_MIRRORS": upstream.mirrors()}
        # `tf upgrade` needs a generated stack; then it works with no arguments at all.
        assert run_in(c, stack, "tf", "generate", env=mirrors).returncode == 0
        proc = run_in(c, stack, "tf", "upgrade", env=mirrors)
    assert proc.returncode == 0, proc.stderr
    assert "0 written" in proc.stdout and "unchanged" in proc.stdout


@pytest.mark.parametrize(
    "args", [["validate"], ["plan"], ["apply", "--yes"], ["tf", "generate"], ["tf", "upgrade"], ["status"], ["destroy"]]
)
def test_missing_default_file_is_a_usage_error_naming_it(c: Cli, tmp_path: Path, args: list[str]) -> None:
    proc = run_in(c, tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert "vmplane.env.jsonc" in proc.stderr and str(tmp_path) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dash_o_is_output_on_tf_generate(c: Cli, tmp_path: Path) -> None:
    env_file = tmp_path / "env.jsonc"
    shutil.copy(EXAMPLES / "fixed.jsonc", env_file)
    proc = c.run("tf", "generate", "-f", str(env_file), "-d", str(tmp_path / "stack"), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["dir"] == str(tmp_path / "stack")
    assert out["written"] and all((tmp_path / "stack" / name).is_file() for name in out["written"])
    assert c.run("tf", "generate", "-f", str(env_file), "-o", str(tmp_path / "x")).returncode == 2  # not a dir


def test_tf_generate_dir_option_and_the_old_out_alias(c: Cli, tmp_path: Path) -> None:
    env_file = tmp_path / "env.jsonc"
    shutil.copy(EXAMPLES / "fixed.jsonc", env_file)
    for flag, where in (("--dir", "a"), ("-d", "b"), ("--out", "c")):
        proc = c.run("tf", "generate", "-f", str(env_file), flag, str(tmp_path / where))
        assert proc.returncode == 0, proc.stderr
        assert any(p.name.startswith("vmplane.env.") for p in (tmp_path / where).glob("*.tf"))
    assert not list(tmp_path.glob("*.tf"))  # nothing went to the file's own directory
    assert "--out " not in c.run("tf", "generate", "--help").stdout  # deprecated: hidden (--output stays)


def test_errors_are_one_line_with_their_exit_code(c: Cli) -> None:
    proc = c.run("resume", "no-such-job")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: no job no-such-job"
    proc = c.run("jobs", "-o", "yaml")
    assert proc.returncode == 2 and "--output must be text or json" in proc.stderr
    assert c.json("jobs") == {"jobs": []}
    assert c.json("envs") == {"environments": []}
