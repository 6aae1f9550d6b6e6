"""The runtime push script with secrets, run for real under a staging root: it installs the fetcher, its
plan and the boot unit, and the fetcher reads moto's store through a fake IMDSv2. moto runs no command on
a VM, so this is where the script that SendCommand carries is shown to work."""

from __future__ import annotations

import base64
import json
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.bootstrap.guest_secrets_fakes import Served, aws_client, aws_source
from tests.bootstrap.test_runtime_push import run

from vmplane.bootstrap import guest_secrets as gs
from vmplane.bootstrap.cloudinit import NGINX_CONF_DIR
from vmplane.bootstrap.runtime import RUNTIME_ENV_PATH, RUNTIME_HASH_PATH, render_push_script, runtime_hash
from vmplane.clouds.aws.capabilities import EXEC_SCRIPT_BYTES
from vmplane.clouds.base import runtime_script_problem
from vmplane.envspec.models import EnvSpec

KEY = f"{NGINX_CONF_DIR}/tls/site.key"
PVE = {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1"}


def spec_of(env: dict[str, Any], files: dict[str, Any], provider: dict[str, Any] | None = None) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "rt",
            "org": "acme",
            "provider": provider or {"cloud": "aws", "region": "us-east-1"},
            "pools": {"web": {"mode": "fixed", "size": 1, **({"template": 9000} if provider else {})}},
            "bootstrap": {"mode": "nginx"},
            "runtime": {"env": env, "files": files},
        }
    )


def at(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_push_installs_the_fetcher_and_boot_unit_and_writes_secrets_root_only(
    tmp_path: Path, moto_url: str, imds: Served
) -> None:
    tag = uuid.uuid4().hex[:8]
    sm = aws_client("secretsmanager", moto_url)
    sm.create_secret(Name=f"db-{tag}", SecretString="pw-Q4-push-value")
    sm.create_secret(Name=f"tls-{tag}", SecretString="-----BEGIN PRIVATE KEY-----\nkey-Q4\n")
    aws_client("ssm", moto_url).put_parameter(Name=f"/{tag}/api", Value="api-Q4-value", Type="SecureString")
    spec = spec_of(
        {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": f"aws-sm:db-{tag}"}, "API": {"secret": f"aws-ssm:/{tag}/api"}},
        {KEY: {"secret": f"aws-sm:tls-{tag}"}, "/srv/app.conf": "plain\n"},
    )
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)  # a VM with systemd
    versions = {f"aws-sm:db-{tag}": "v-1", f"aws-ssm:/{tag}/api": "1", f"aws-sm:tls-{tag}": "v-9"}
    script = render_push_script(spec, str(root), source=aws_source(moto_url, imds.url), versions=versions)
    values = ["pw-Q4-push-value", "key-Q4", "api-Q4-value"]
    assert not [v for v in values if v in script or base64.b64encode(v.encode()).decode()[:8] in script]
    assert len(script.encode()) <= EXEC_SCRIPT_BYTES

    proc, docker = run(script, tmp_path)
    assert proc.returncode == 0, proc.stderr
    env_file = at(root, RUNTIME_ENV_PATH)
    assert env_file.read_text() == "API=api-Q4-value\nDB_PASSWORD=pw-Q4-push-value\nLOG_LEVEL=info\n"
    assert at(root, KEY).read_text() == "-----BEGIN PRIVATE KEY-----\nkey-Q4\n"
    assert mode(env_file) == mode(at(root, KEY)) == 0o600 and mode(at(root, "/srv/app.conf")) == 0o644
    # The fetcher, under the VM's own python3; its plan holds references only.
    fetcher, plan = at(root, gs.FETCHER_PATH), at(root, gs.PLAN_PATH)
    assert mode(fetcher) == 0o700 and fetcher.read_text().startswith("#!/") and "def fetch_all" in fetcher.read_text()
    assert mode(plan) == 0o600 and not [v for v in values if v in plan.read_text()]
    assert json.loads(plan.read_text())["env"]["DB_PASSWORD"]["ref"] == f"aws-sm:db-{tag}"
    unit = root / "etc/systemd/system" / gs.UNIT_NAME
    assert (
        f"ExecStart={gs.FETCHER_PATH} {gs.PLAN_PATH}" in unit.read_text()
        and "Before=docker.service" in unit.read_text()
    )
    link = root / "etc/systemd/system/multi-user.target.wants" / gs.UNIT_NAME
    assert link.is_symlink() and str(link.readlink()) == f"{gs.UNIT_DIR}/{gs.UNIT_NAME}"
    assert at(root, RUNTIME_HASH_PATH).read_text() == runtime_hash(spec, versions)
    # The TLS key is one of NGINX's files: it reloads, as for a plain file there.
    assert docker == ["exec zop-nginx nginx -t", "exec zop-nginx nginx -s reload"]
    assert "3 file(s) changed" in proc.stdout and str(at(root, KEY)) in proc.stdout
    assert not list(root.rglob("*.vmplane-tmp"))

    proc, docker = run(script, tmp_path)
    assert proc.returncode == 0 and "0 file(s) changed" in proc.stdout and docker == []

    sm.put_secret_value(SecretId=f"db-{tag}", SecretString="pw-Q4-rotated")
    proc, docker = run(script, tmp_path)  # the same script: the VM reads the new version itself
    assert proc.returncode == 0 and "1 file(s) changed" in proc.stdout and docker == []
    assert "DB_PASSWORD=pw-Q4-rotated" in env_file.read_text()

    # The secrets leave the spec: the fetcher, its plan and the boot unit go too.
    proc, _ = run(render_push_script(spec_of({"LOG_LEVEL": "info"}, {}), str(root)), tmp_path)
    assert proc.returncode == 0 and env_file.read_text() == "LOG_LEVEL=info\n"
    assert not [p for p in (fetcher, plan, unit) if p.exists()] and not link.is_symlink()


def test_without_systemd_the_push_still_delivers_and_a_failed_fetch_fails_it(
    tmp_path: Path, moto_url: str, imds: Served
) -> None:
    root = tmp_path / "root"
    spec = spec_of({"DB": {"secret": f"aws-sm:absent-{uuid.uuid4().hex[:8]}"}}, {})
    proc, _ = run(render_push_script(spec, str(root), source=aws_source(moto_url, imds.url)), tmp_path)
    assert proc.returncode != 0 and "runtime.env.DB (aws-sm:absent-" in proc.stderr
    assert not at(root, RUNTIME_ENV_PATH).exists() and not at(root, RUNTIME_HASH_PATH).exists()
    assert not (root / "etc/systemd").exists()  # no systemd here: no unit written


def test_env_refs_are_sent_inline_root_only_and_never_in_a_plan(tmp_path: Path) -> None:
    spec = spec_of({"A": "1", "DB": {"secret": "env:PVE_DB_PW"}}, {"/srv/k.pem": {"secret": "env:PVE_KEY"}}, PVE)
    root = tmp_path / "root"
    values = {"env:PVE_DB_PW": "pve-pw-value", "env:PVE_KEY": "pem-body\n"}
    proc, _ = run(render_push_script(spec, str(root), env_values=values), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert at(root, RUNTIME_ENV_PATH).read_text() == "A=1\nDB=pve-pw-value\n"
    assert mode(at(root, RUNTIME_ENV_PATH)) == mode(at(root, "/srv/k.pem")) == 0o600
    assert not at(root, gs.PLAN_PATH).exists() and not at(root, gs.FETCHER_PATH).exists()

    with pytest.raises(ValueError, match=r"runtime.files\[\"/srv/k.pem\"\]: env:PVE_KEY was not read"):
        render_push_script(spec, str(root), env_values={"env:PVE_DB_PW": "x"})
    with pytest.raises(ValueError, match=r"runtime\.env\.DB: the value of env:PVE_DB_PW spans lines"):
        render_push_script(spec, str(root), env_values={**values, "env:PVE_DB_PW": "a\nb"})


def test_a_script_rendered_for_measuring_refuses_to_run_and_measures_close(tmp_path: Path) -> None:
    spec = spec_of({"DB": {"secret": "aws-sm:db"}}, {})
    measured = render_push_script(spec, str(tmp_path / "root"))
    proc, _ = run(measured, tmp_path)
    assert proc.returncode != 0 and "rendered for measuring only" in proc.stderr
    assert not (tmp_path / "root").exists()
    real = render_push_script(spec, str(tmp_path / "root"), source=aws_source("http://127.0.0.1:1", "http://x"))
    assert len(real.encode()) <= len(measured.encode())  # the stand-in source is at least as large
    assert runtime_script_problem(spec, EXEC_SCRIPT_BYTES) is None
    size = len(render_push_script(spec).encode())  # what runtime_script_problem measures (no root prefix)
    assert runtime_script_problem(spec, size) is None and runtime_script_problem(spec, size - 1) is not None


def test_the_runtime_hash_covers_secret_versions_and_plain_settings_hash_as_before() -> None:
    plain = spec_of({"A": "1"}, {})
    assert runtime_hash(plain) == runtime_hash(plain, {"aws-sm:db": "v2"})
    spec = spec_of({"DB": {"secret": "aws-sm:db"}}, {})
    assert runtime_hash(spec, {"aws-sm:db": "v1"}) != runtime_hash(spec, {"aws-sm:db": "v2"})
    assert runtime_hash(spec, {"aws-sm:db": "v1"}) != runtime_hash(spec_of({"DB": {"secret": "aws-sm:db2"}}, {}))
    assert runtime_hash(spec, {"aws-sm:db": "v1", "aws-sm:other": "x"}) == runtime_hash(spec, {"aws-sm:db": "v1"})
