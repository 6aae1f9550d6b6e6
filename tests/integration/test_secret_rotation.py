"""Rotation of a secret on the AWS sandbox, end to end: a Secrets Manager secret and an SSM SecureString
planted in moto, examples/fixed.jsonc applied with references to them, then each one updated in its store
and delivered by `vmplane apply` of the unchanged file and by `vmplane push ENV`: a new command each time,
the same instances (nothing replaced), a runtime push in the job's operations.

moto records SendCommand but runs nothing on a VM. So the test reads back the script each VM was sent,
checks that it is exactly what vmplane renders for the sandbox's store (references only, no value), and
runs that script locally: rendered for a staging root instead of `/` and with the fetcher's IMDS pointed at
a fake IMDSv2 thread (the only two differences; the store endpoints are the sandbox's own, as sent), the
fetcher reads moto's store and the staged env file changes when the secret does."""

from __future__ import annotations

import contextlib
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.bootstrap.guest_secrets_fakes import serve_imds
from tests.bootstrap.test_runtime_push import run
from tests.helpers import Cli, Sandbox, write_env

from vmplane.bootstrap.runtime import RUNTIME_ENV_PATH, render_push_script
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import secret_refs

REGION = "us-east-1"
PUSH = ["stepPushRuntime", "stepRegisterSpace"]


def pushed_scripts(sb: Sandbox, instance_id: str) -> list[str]:
    """The runtime push scripts SSM recorded for the instance, oldest first (moto keeps each command's
    parameters: list_commands)."""
    commands = sb.client("ssm").list_commands(InstanceId=instance_id)["Commands"]
    scripts = [c["Parameters"]["commands"][0] for c in sorted(commands, key=lambda c: c["RequestedDateTime"])]
    return [s for s in scripts if "vmplane runtime:" in s]


def referencing_env(tmp_path: Path, name: str, db: str, api: str) -> Path:
    """examples/fixed.jsonc with two of its runtime values kept in a store instead of the file: the
    example itself holds plain settings only (a shipped file cannot name a secret in someone's account)."""
    runtime: dict[str, Any] = {
        "env": {
            "LOG_LEVEL": "info",
            "DB_PASSWORD": {"secret": f"aws-sm:{db}"},
            "API_TOKEN": {"secret": f"aws-ssm:{api}"},
        }
    }
    return write_env(tmp_path, name, runtime=runtime)


class Store:
    """What the VM's fetcher would be given, read the way the driver reads it (metadata only)."""

    def __init__(self, sandbox: Sandbox, spec: EnvSpec) -> None:
        self.access = AwsSecretAccess(AwsClients(AwsTarget(region=REGION, endpoint_url=sandbox.endpoint)))
        self.spec = spec

    def sent(self) -> str:
        """The script vmplane sends for the store's current versions."""
        versions = self.access.versions(secret_refs(self.spec))
        return render_push_script(self.spec, source=self.access.guest_source(), versions=versions)

    def staged(self, root: Path, imds_url: str) -> str:
        """The same script for a staging root, its fetcher asking a fake IMDS for the role's credentials."""
        source = self.access.guest_source()
        source = {**source, "endpoints": {**source["endpoints"], "imds": imds_url}}
        versions = self.access.versions(secret_refs(self.spec))
        return render_push_script(self.spec, str(root), source=source, versions=versions)


def _ids(job: dict[str, Any]) -> dict[str, str]:
    return {v["Name"]: v["ID"] for v in job["config"]["infra"]["VMs"]}


def _home_holds_none(cli: Cli, *values: str) -> None:
    for path in cli.home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [v for v in values if v.encode() in data], path


@pytest.mark.sandbox
def test_a_rotated_secret_reaches_the_vms_by_apply_and_by_push_without_replacement(
    cli: Cli, sandbox: Sandbox, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    db, api = f"itest/{tag}/db", f"/itest/{tag}/api"
    values = [f"rot-db-one-{tag}", f"rot-db-two-{tag}", f"rot-api-one-{tag}", f"rot-api-two-{tag}"]
    sm, ssm = sandbox.client("secretsmanager"), sandbox.client("ssm")
    sm.create_secret(Name=db, SecretString=values[0])
    ssm.put_parameter(Name=api, Value=values[2], Type="SecureString")
    env_file = referencing_env(tmp_path, f"itest-rot-{tag}", db, api)
    store = Store(sandbox, load_spec(env_file))
    root = tmp_path / "vm"
    env_path = root / RUNTIME_ENV_PATH.lstrip("/")

    with contextlib.contextmanager(serve_imds)() as imds:

        def run_staged() -> str:
            proc, _docker = run(store.staged(root, imds.url), tmp_path)
            assert proc.returncode == 0, proc.stderr
            return proc.stdout

        job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert job["status"] == "succeeded", job["error"]
        ids = _ids(job)
        log = "\n".join(line for s in job["steps"] for line in s.get("log", []))
        assert "2 secrets the VMs fetch themselves (0 pinned)" in log, log
        assert "the emulator records the push command but runs nothing" in log, log
        first = store.sent()
        assert not [v for v in values if v in first]  # references only
        for vm_id in ids.values():
            assert pushed_scripts(sandbox, vm_id) == [first]
        out = run_staged()
        assert "1 file(s) changed" in out, out
        assert env_path.read_text() == f"API_TOKEN={values[2]}\nDB_PASSWORD={values[0]}\nLOG_LEVEL=info\n"
        assert stat.S_IMODE(env_path.stat().st_mode) == 0o600

        # Rotated in Secrets Manager: the file is unchanged, plan shows the new version at its field.
        put = sm.put_secret_value(SecretId=db, SecretString=values[1])
        plan = cli.json("plan", "-f", str(env_file), "--sandbox")
        assert plan["decision"] == "update" and plan["steps"] == PUSH
        assert [(c["path"], c["new"], c["impact"]) for c in plan["changes"]] == [
            ("runtime.env.DB_PASSWORD.secret", f"new version {put['VersionId']}", "runtime")
        ]
        applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert applied["status"] == "succeeded", applied["error"]
        op = applied["config"]["operation"]
        assert op["kind"] == "update" and [s["name"] for s in op["steps"]] == PUSH
        assert _ids(applied) == ids  # nothing replaced
        second = store.sent()
        assert second != first
        for vm_id in ids.values():
            assert pushed_scripts(sandbox, vm_id) == [first, second]
        out = run_staged()
        assert "1 file(s) changed" in out and f"DB_PASSWORD={values[1]}\n" in env_path.read_text(), out

        # Rotated in Parameter Store: `vmplane push` delivers it.
        ssm.put_parameter(Name=api, Value=values[3], Type="SecureString", Overwrite=True)
        pushed = cli.json("push", f"itest-rot-{tag}", "--yes")
        assert pushed["status"] == "succeeded", pushed["error"]
        op = pushed["config"]["operation"]
        assert op["kind"] == "push" and [s["name"] for s in op["steps"]] == PUSH
        assert _ids(pushed) == ids
        third = store.sent()
        for vm_id in ids.values():
            assert pushed_scripts(sandbox, vm_id) == [first, second, third]
        out = run_staged()
        assert f"API_TOKEN={values[3]}\n" in env_path.read_text(), out

        # Nothing new in the stores: a push sends nothing, a forced one sends the same script again.
        again = cli.json("push", f"itest-rot-{tag}", "--yes")
        assert again["status"] == "succeeded"
        assert all(len(pushed_scripts(sandbox, vm_id)) == 3 for vm_id in ids.values())
        forced = cli.json("push", f"itest-rot-{tag}", "--force", "--yes")
        assert forced["status"] == "succeeded"
        assert all(pushed_scripts(sandbox, vm_id)[-1] == third for vm_id in ids.values())
        assert "0 file(s) changed" in run_staged()

    _home_holds_none(cli, *values)  # the job record, its logs: references and version ids only
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
