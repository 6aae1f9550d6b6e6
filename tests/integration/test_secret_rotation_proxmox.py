"""Rotation of an `env:` secret on Proxmox VE through fakepve: vmplane reads the variable from its own
environment at push time and sends the value inside the guest-agent script (the design: Proxmox has no
store the VM could read). The script fakepve recorded holds it; the job record, vmplane's output and every
file under its home do not. A new value goes out with `vmplane push ENV` and with an apply of the
unchanged file (env: has no version to compare, so every push delivers); no VM is replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.proxmox.fakecluster import Serving, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.privileges_kit import grant_readme_privileges
from tests.proxmox.pve_cli import PveCli, pve_cli, write_pve_env

from vmplane.bootstrap.runtime import render_push_script
from vmplane.envspec.load import load_spec

VAR = "VMPLANE_TEST_PVE_DB_PASSWORD"
REF = f"env:{VAR}"
FIRST, SECOND, THIRD = "pve-rotation-Zx9q-first", "pve-rotation-Qw7e-second", "pve-rotation-Mn4r-third"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Serving]:
    with serve(tmp_path) as serving:
        grant_readme_privileges(serving)
        player = GuestPlayer(serving).start()
        try:
            yield serving
        finally:
            player.stop()


def _scripts(serving: Serving, vmid: int) -> list[str]:
    """The runtime push scripts the guest agent of VM `vmid` was asked to run, in order."""
    argvs = serving.run(lambda: [list(a) for vm in serving.pve.vms if vm.vmid == vmid for a in vm.agent_execs.values()])
    return [a[-1].strip() for a in argvs if "vmplane runtime:" in a[-1]]  # agent_exec ends it with a newline


def _never_stored(cli: PveCli, *texts: str) -> None:
    """No value of the secret in vmplane's output or in anything under its home (databases, logs)."""
    for value in (FIRST, SECOND, THIRD):
        for text in texts:
            assert value not in text
        for path in cli.home.rglob("*"):
            if path.is_file():
                assert value.encode() not in path.read_bytes(), path


def _run(cli: PveCli, value: str | None, *args: str) -> tuple[int, str, str]:
    proc = cli.run(*args, extra_env={VAR: value} if value is not None else None)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.slow
def test_env_secret_rotates_by_push_and_by_apply_without_replacement(fake: Serving, tmp_path: Path) -> None:
    cli = pve_cli(tmp_path)
    runtime = {"env": {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": REF}}}
    env_file = write_pve_env(tmp_path, fake, "pvs", runtime=runtime)
    spec = load_spec(env_file)

    # Not set where vmplane runs: plan refuses (exit 2) naming the field and the variable; nothing created.
    code, out, err = _run(cli, None, "plan", "-f", str(env_file))
    assert code == 2, out + err
    assert "runtime.env.DB_PASSWORD.secret" in err and VAR in err, err

    code, out, err = _run(cli, FIRST, "apply", "-f", str(env_file), "--yes", "-o", "json")
    assert code == 0, out + err
    job = json.loads(out)
    assert job["status"] == "succeeded", job["error"]
    ids = {v["Name"]: v["ID"] for v in job["config"]["infra"]["VMs"]}
    log = "\n".join(line for s in job["steps"] for line in s.get("log", []))
    assert "1 from vmplane's environment (env:)" in log, log
    # What the guest agent received is the script holding the value (the design on Proxmox).
    first = render_push_script(spec, env_values={REF: FIRST}, versions={REF: None}).strip()
    for vmid in ids.values():
        assert _scripts(fake, int(vmid)) == [first]
    _never_stored(cli, out, err)

    # plan of the unchanged file: env: has no version, so the value is due again, named by its field.
    code, out, err = _run(cli, SECOND, "plan", "-f", str(env_file), "-o", "json")
    assert code == 0, out + err
    plan = json.loads(out)
    assert [(c["path"], c["impact"]) for c in plan["changes"]] == [("runtime.env.DB_PASSWORD.secret", "runtime")]
    assert plan["steps"] == ["stepPushRuntime", "stepRegisterSpace"]

    # A new value in the environment: `vmplane push` sends it, replacing nothing. Debug logs (every API
    # call, on stderr) name the guest-agent call, never the script it carried.
    code, out, err = _run(cli, SECOND, "--log-level", "debug", "push", "pvs", "--yes", "-o", "json")
    assert code == 0, out + err
    pushed = json.loads(out)
    assert pushed["status"] == "succeeded", pushed["error"]
    assert pushed["config"]["operation"]["kind"] == "push"
    assert [s["name"] for s in pushed["config"]["operation"]["steps"]] == ["stepPushRuntime", "stepRegisterSpace"]
    assert {v["Name"]: v["ID"] for v in pushed["config"]["infra"]["VMs"]} == ids  # nothing replaced
    second = render_push_script(spec, env_values={REF: SECOND}, versions={REF: None}).strip()
    for vmid in ids.values():
        assert _scripts(fake, int(vmid))[-1] == second
    _never_stored(cli, out, err)

    # And an apply of the unchanged file delivers the next one: an update of the runtime only.
    code, out, err = _run(cli, THIRD, "apply", "-f", str(env_file), "--yes", "-o", "json")
    assert code == 0, out + err
    applied = json.loads(out)
    assert applied["status"] == "succeeded", applied["error"]
    assert applied["config"]["operation"]["kind"] == "update"
    assert [s["name"] for s in applied["config"]["operation"]["steps"]] == ["stepPushRuntime", "stepRegisterSpace"]
    assert {v["Name"]: v["ID"] for v in applied["config"]["infra"]["VMs"]} == ids
    third = render_push_script(spec, env_values={REF: THIRD}, versions={REF: None}).strip()
    for vmid in ids.values():
        assert _scripts(fake, int(vmid))[-1] == third
    _never_stored(cli, out, err)

    # Unset where vmplane runs: push and plan of the applied environment refuse (exit 2) naming the field
    # and the variable, and nothing is recorded.
    for args in (("push", "pvs", "--yes"), ("plan", "-f", str(env_file))):
        code, out, err = _run(cli, None, *args)
        assert code == 2, out + err
        assert "runtime.env.DB_PASSWORD.secret" in err and VAR in err, err
    code, out, err = _run(cli, None, "status", "pvs", "-o", "json")
    assert code == 0 and json.loads(out)["config"]["operation"]["kind"] == "update"  # no push recorded
    _never_stored(cli, out, err)
