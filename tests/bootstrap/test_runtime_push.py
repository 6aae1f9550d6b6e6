"""The runtime push script, run for real under a staging root with a stub `docker`, and the push step
that sends it only to VMs that lack the current settings."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from vmplane.bootstrap.cloudinit import NGINX_CONF_DIR
from vmplane.bootstrap.runtime import RUNTIME_ENV_PATH, RUNTIME_HASH_PATH, render_push_script, runtime_hash
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.base import CommandResult, CommandStatus, Context, Tagger
from vmplane.envspec.models import BootstrapMode, EnvSpec
from vmplane.pipeline.runtime_push import RuntimePushError, push_runtime
from vmplane.state import InfraConfig, VMRecord, VMState

CONF = f"{NGINX_CONF_DIR}/app.conf"


def make_spec(mode: BootstrapMode = BootstrapMode.nginx, env=None, files=None) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "rt",
            "org": "acme",
            "provider": {"cloud": "aws", "region": "us-east-1"},
            "pools": {"web": {"mode": "fixed", "size": 2}},
            "bootstrap": {"mode": mode.value},
            "runtime": {"env": env or {}, "files": files or {}},
        }
    )


def run(script: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the script with a stub `docker` that records its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "docker-calls"
    stub = bin_dir / "docker"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    recorded = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return proc, recorded


def test_push_writes_env_and_files_atomically_and_reloads_nginx_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    spec = make_spec(env={"LOG_LEVEL": "debug", "A": "x y"}, files={CONF: "server { listen 8080; }\n"})
    proc, docker = run(render_push_script(spec, root=str(root)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (root / RUNTIME_ENV_PATH.lstrip("/")).read_text() == "A=x y\nLOG_LEVEL=debug\n"
    assert stat.S_IMODE((root / RUNTIME_ENV_PATH.lstrip("/")).stat().st_mode) == 0o600
    assert (root / CONF.lstrip("/")).read_text() == "server { listen 8080; }\n"
    assert (root / RUNTIME_HASH_PATH.lstrip("/")).read_text() == runtime_hash(spec)
    assert not list(root.rglob("*.vmplane-tmp"))  # nothing half-written is left behind
    assert docker == ["exec zop-nginx nginx -t", "exec zop-nginx nginx -s reload"]
    assert "2 file(s) changed" in proc.stdout

    # The same settings again: nothing changes, nothing reloads.
    proc, docker = run(render_push_script(spec, root=str(root)), tmp_path)
    assert proc.returncode == 0 and "0 file(s) changed" in proc.stdout and docker == []

    # An env change only: the env file is rewritten, NGINX is not reloaded.
    changed = make_spec(env={"LOG_LEVEL": "info"}, files={CONF: "server { listen 8080; }\n"})
    proc, docker = run(render_push_script(changed, root=str(root)), tmp_path)
    assert proc.returncode == 0 and "1 file(s) changed" in proc.stdout and docker == []
    assert (root / RUNTIME_ENV_PATH.lstrip("/")).read_text() == "LOG_LEVEL=info\n"


def test_bare_mode_never_calls_docker(tmp_path: Path) -> None:
    spec = make_spec(BootstrapMode.bare, files={CONF: "x"})
    proc, docker = run(render_push_script(spec, root=str(tmp_path / "root")), tmp_path)
    assert proc.returncode == 0 and docker == []


def test_quotes_and_dollars_arrive_verbatim(tmp_path: Path) -> None:
    root = tmp_path / "root"
    content = 'it\'s $HOME and `id` and "quoted"\n'
    proc, _ = run(render_push_script(make_spec(files={"/srv/a b/c.txt": content}), root=str(root)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (root / "srv/a b/c.txt").read_text() == content


def test_a_failing_write_fails_the_script(tmp_path: Path) -> None:
    blocker = tmp_path / "root" / "etc"
    blocker.parent.mkdir()
    blocker.write_text("a file where a directory must be")
    proc, _ = run(render_push_script(make_spec(), root=str(tmp_path / "root")), tmp_path)
    assert proc.returncode != 0


def test_multiline_env_values_are_refused() -> None:
    with pytest.raises(ValueError, match="values are one line"):
        make_spec(env={"A": "1\n2"})


class FakeDriver:
    """Stands in for the exec channel: records what was sent, answers per instance."""

    capabilities = AwsDriver.capabilities

    def __init__(self, fail: set[str] | None = None) -> None:
        self.sent: list[tuple[list[str], list[str]]] = []
        self.fail = fail or set()

    @property
    def exec_channel(self) -> FakeDriver:
        return self  # the driver's exec part: `run`

    def run(self, ids: list[str], commands: list[str], timeout: float, comment: str = "") -> list[CommandResult]:
        self.sent.append((ids, commands))
        return [
            CommandResult(
                i,
                CommandStatus.failed if i in self.fail else CommandStatus.success,
                1 if i in self.fail else 0,
                "",
                "disk full",
            )
            for i in ids
        ]


def _ctx(spec: EnvSpec, hashes: list[str | None]) -> Context:
    vms = [
        VMRecord(Name=f"rt-web-{i}", Pool="web", Index=i, ID=f"i-{i}", State=VMState.ready, RuntimeHash=h)
        for i, h in enumerate(hashes)
    ]
    return Context(job_id="j", spec=spec, infra=InfraConfig(VMs=vms), tagger=Tagger.for_spec(spec, "j"))


def test_push_goes_only_to_vms_without_the_current_settings() -> None:
    spec = make_spec(env={"A": "1"})
    ctx = _ctx(spec, [runtime_hash(spec), None])
    driver = FakeDriver()
    assert push_runtime(driver, ctx, sandbox=False) == 1
    assert driver.sent == [(["i-1"], [render_push_script(spec)])]
    assert all(v.RuntimeHash == runtime_hash(spec) for v in ctx.infra.VMs)
    assert push_runtime(driver, ctx, sandbox=False) == 0 and len(driver.sent) == 1


def test_a_failed_push_names_the_vm_and_keeps_it_stale() -> None:
    spec = make_spec(env={"A": "1"})
    ctx = _ctx(spec, [None, None])
    with pytest.raises(RuntimePushError, match="rt-web-1: disk full"):
        push_runtime(FakeDriver(fail={"i-1"}), ctx, sandbox=False)
    assert [v.RuntimeHash for v in ctx.infra.VMs] == [runtime_hash(spec), None]
