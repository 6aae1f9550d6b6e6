"""The toy cloud through the CLI, as a plugin (VMPLANE_CLOUD_PLUGINS): validate, plan, apply, a re-run that
writes nothing, destroy; and a plugin that fails to import, named in the error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.helpers import Cli

ROOT = Path(__file__).resolve().parents[2]


def toy_file(tmp_path: Path, state: Path, size: int = 2, name: str = "toy-env") -> Path:
    spec = {
        "name": name,
        "org": "acme",
        "provider": {"cloud": "toy", "region": "toy-1", "stateFile": str(state)},
        "network": {"cidr": "10.40.0.0/16", "ingressPorts": [80]},
        "pools": {"web": {"mode": "fixed", "size": size}},
        "bootstrap": {"mode": "bare"},
    }
    path = tmp_path / f"{name}.jsonc"
    path.write_text(json.dumps(spec))
    return path


def plugin_env(modules: str = "tests.toycloud.plugin") -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"VMPLANE_CLOUD_PLUGINS": modules, "PYTHONPATH": path}


def resources(state: Path) -> list[tuple[str, str]]:
    rows = json.loads(state.read_text())["resources"].values() if state.exists() else []
    return sorted((r["kind"], r["name"]) for r in rows)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(home=tmp_path / "home", sandbox_port=1)


def test_a_toy_plugin_validates_plans_applies_and_destroys_through_the_cli(tmp_path: Path, cli: Cli) -> None:
    state = tmp_path / "cloud.json"
    spec = toy_file(tmp_path, state)
    env = plugin_env()

    done = cli.run("validate", "-f", str(spec), extra_env=env)
    assert done.returncode == 0, done.stderr
    plan = cli.run("plan", "-f", str(spec), "--refresh", "false", extra_env=env)
    assert plan.returncode == 0, plan.stderr
    for name in ("acme-toy-env-net", "acme-toy-env-fw", "acme-toy-env-web", "acme-toy-env-web-0", "acme-toy-env-web-1"):
        assert name in plan.stdout

    applied = cli.run("apply", "-f", str(spec), "--yes", extra_env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    made = resources(state)
    assert made == [
        ("firewall", "acme-toy-env-fw"),
        ("network", "acme-toy-env-net"),
        ("template", "acme-toy-env-web"),
        ("vm", "acme-toy-env-web-0"),
        ("vm", "acme-toy-env-web-1"),
    ]
    before = state.read_text()
    again = cli.run("apply", "-f", str(spec), "--yes", extra_env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert state.read_text() == before  # a re-run writes nothing

    gone = cli.run("destroy", "-f", str(spec), "--yes", extra_env=env)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert resources(state) == []


def test_a_plugin_that_fails_to_import_is_named_with_the_variable(tmp_path: Path, cli: Cli) -> None:
    spec = toy_file(tmp_path, tmp_path / "cloud.json")
    done = cli.run("validate", "-f", str(spec), extra_env=plugin_env("tests.toycloud.plugin,no_such_cloud_plugin"))
    assert done.returncode == 2  # a usage error, in the CLI's one line, not a traceback
    assert done.stderr.startswith("error: cloud plugin 'no_such_cloud_plugin' (from VMPLANE_CLOUD_PLUGINS=")
    assert "ModuleNotFoundError: No module named 'no_such_cloud_plugin'" in done.stderr
    assert "Traceback" not in done.stderr
