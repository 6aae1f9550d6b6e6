"""Cloud-init user-data: schema validity, content rules, and the bootstrap script run against stubs.

The script tests execute the real rendered bash script with PATH limited to stub `docker`, `dnf`,
`apt-get`, `systemctl` and `sleep` executables (which log their argv) plus the few coreutils the
script needs, so nothing on this machine is installed, started or written outside tmp_path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmplane.bootstrap.cloudinit import (
    BOOTSTRAP_LOG_PATH,
    BOOTSTRAP_SCRIPT_PATH,
    IDENTITY_PATH,
    NETWORK_NAME,
    NGINX_CONF_PATH,
    NGINX_CONTAINER_NAME,
    NGINX_IMAGE,
    RETRY_ATTEMPTS,
    SENTINEL_CHECK_COMMAND,
    check_user_data_size,
    render_bootstrap_script,
    render_user_data,
)
from vmplane.envspec.models import SENTINEL_PATH, BootstrapMode, EnvSpec

SCHEMA_FILE = Path("/usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-cloud-config-v1.json")
MODES = [BootstrapMode.nginx, BootstrapMode.bare]
BASH = shutil.which("bash") or "/bin/bash"


def make_spec(mode: BootstrapMode = BootstrapMode.nginx, **extra: Any) -> EnvSpec:
    data: dict[str, Any] = {
        "name": "demo-fixed",
        "org": "acme",
        "provider": {"cloud": "aws", "region": "us-east-1"},
        "pools": {
            "web": {"mode": "fixed", "size": 2, "image": "al2023", "arch": "amd64"},
            "workers": {
                "mode": "asg",
                "min": 0,
                "max": 3,
                "desired": 1,
                "image": "ubuntu-24.04",
                "arch": "arm64",
                "instanceType": "t4g.small",
            },
        },
        "bootstrap": {"mode": mode.value},
        **extra,
    }
    return EnvSpec.model_validate(data)


def parse(user_data: str) -> dict[str, Any]:
    assert user_data.startswith("#cloud-config\n")
    doc = yaml.safe_load(user_data)
    assert isinstance(doc, dict)
    return doc


def files_by_path(user_data: str) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in parse(user_data)["write_files"]}


def script_of(user_data: str) -> str:
    return files_by_path(user_data)[BOOTSTRAP_SCRIPT_PATH]["content"]


@pytest.fixture(params=MODES, ids=lambda m: m.value)
def user_data(request: pytest.FixtureRequest) -> str:
    return render_user_data(make_spec(request.param), "web")


# --- schema validity -------------------------------------------------------------------------


@pytest.mark.parametrize("pool", ["web", "workers"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_cloud_init_cli_accepts_user_data(tmp_path: Path, mode: BootstrapMode, pool: str) -> None:
    cli = shutil.which("cloud-init")
    if cli is None:
        pytest.skip("cloud-init is not on PATH (Debian package `cloud-init` provides `cloud-init schema`)")
    path = tmp_path / "user-data"
    path.write_text(render_user_data(make_spec(mode), pool))
    result = subprocess.run([cli, "schema", "-c", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cloud_init_cli_rejects_invalid_document(tmp_path: Path) -> None:
    """Negative control: the CLI check above is not vacuous."""
    cli = shutil.which("cloud-init")
    if cli is None:
        pytest.skip("cloud-init is not on PATH")
    path = tmp_path / "user-data"
    path.write_text("#cloud-config\nwrite_files:\n- content: x\n")
    result = subprocess.run([cli, "schema", "-c", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode != 0


@pytest.fixture(scope="module")
def cloud_config_validator() -> Any:
    if not SCHEMA_FILE.is_file():
        pytest.skip(f"cloud-init JSON schema not found at {SCHEMA_FILE}")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.mark.parametrize("pool", ["web", "workers"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_json_schema_accepts_user_data(cloud_config_validator: Any, mode: BootstrapMode, pool: str) -> None:
    doc = parse(render_user_data(make_spec(mode), pool))
    errors = [e.message for e in cloud_config_validator.iter_errors(doc)]
    assert errors == []


def test_json_schema_rejects_invalid_document(cloud_config_validator: Any) -> None:
    assert not cloud_config_validator.is_valid({"write_files": [{"content": "x"}]})
    assert not cloud_config_validator.is_valid({"ssh_pwauth": False, "runcmd": "not-a-list"})


# --- document content ------------------------------------------------------------------------


def test_no_ssh_keys_and_ssh_locked_down(user_data: str) -> None:
    doc = parse(user_data)
    assert "ssh_authorized_keys" not in user_data
    assert "ssh_keys" not in doc and "users" not in doc
    assert doc["ssh_pwauth"] is False
    assert doc["disable_root"] is True


def test_script_written_executable_and_run_from_runcmd(user_data: str) -> None:
    script_file = files_by_path(user_data)[BOOTSTRAP_SCRIPT_PATH]
    assert script_file["permissions"] == "0755"
    assert parse(user_data)["runcmd"] == [["/bin/bash", BOOTSTRAP_SCRIPT_PATH]]
    script = script_file["content"]
    assert script.startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in script
    assert BOOTSTRAP_LOG_PATH in script


def test_script_passes_bash_syntax_check(user_data: str, tmp_path: Path) -> None:
    path = tmp_path / "bootstrap.sh"
    path.write_text(script_of(user_data))
    result = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_script_steps_in_order_nginx() -> None:
    script = script_of(render_user_data(make_spec(BootstrapMode.nginx), "web"))
    markers = [
        "dnf install -y docker",
        "docker network create --driver bridge",
        "docker run -d --name",
        "\ninstall_docker\n",
        "\nstart_docker\n",
        "\ncreate_network\n",
        "\n  run_nginx\n",
        "\nwrite_sentinel\n",
    ]
    positions = [script.index(m) for m in markers]
    assert positions == sorted(positions)
    assert f"NETWORK_NAME={NETWORK_NAME}\n" in script
    assert f"NGINX_IMAGE={NGINX_IMAGE}\n" in script
    assert f"NGINX_CONTAINER={NGINX_CONTAINER_NAME}\n" in script
    assert "BOOTSTRAP_MODE=nginx\n" in script
    # The sentinel is the last step of the main sequence.
    main = script[script.index("\ninstall_docker\n") :]
    assert main.rstrip().splitlines()[-2:] == [
        "write_sentinel",
        'log "bootstrap complete; sentinel at $SENTINEL_PATH"',
    ]


def test_bare_mode_has_no_nginx() -> None:
    user_data = render_user_data(make_spec(BootstrapMode.bare), "web")
    assert NGINX_CONF_PATH not in files_by_path(user_data)
    assert "BOOTSTRAP_MODE=bare\n" in script_of(user_data)
    assert NETWORK_NAME in script_of(user_data)
    nginx_doc = render_user_data(make_spec(BootstrapMode.nginx), "web")
    assert NGINX_CONF_PATH in files_by_path(nginx_doc)
    assert user_data != nginx_doc


def test_nginx_default_server_answers_healthz() -> None:
    conf = files_by_path(render_user_data(make_spec(), "web"))[NGINX_CONF_PATH]["content"]
    assert "listen 80 default_server;" in conf
    assert "location = /healthz {" in conf and 'return 200 "ok";' in conf
    assert "return 404;" in conf


def test_identity_file() -> None:
    user_data = render_user_data(make_spec(), "workers")
    identity = json.loads(files_by_path(user_data)[IDENTITY_PATH]["content"])
    assert identity == {"env": "demo-fixed", "pool": "workers", "arch": "arm64"}


def test_runtime_settings_never_reach_user_data() -> None:
    runtime = {"env": {"API_TOKEN": "s3cr3t-value"}, "files": {"/etc/app/conf.ini": "secret-file-body"}}
    with_runtime = render_user_data(make_spec(runtime=runtime), "web")
    assert "s3cr3t-value" not in with_runtime and "API_TOKEN" not in with_runtime
    assert "secret-file-body" not in with_runtime
    # Changing runtime settings leaves user-data (and so the VMs) untouched.
    assert with_runtime == render_user_data(make_spec(), "web")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_deterministic(mode: BootstrapMode) -> None:
    spec = make_spec(mode)
    first = render_user_data(spec, "web").encode()
    assert first == render_user_data(spec, "web").encode()
    assert first == render_user_data(make_spec(mode), "web").encode()


USER_DATA_LIMIT_BYTES = 16384  # EC2's, the smallest of the clouds'


def test_size_under_limit(user_data: str) -> None:
    assert len(user_data.encode()) < USER_DATA_LIMIT_BYTES // 2


def test_size_check_raises_over_limit() -> None:
    check_user_data_size("x" * USER_DATA_LIMIT_BYTES, USER_DATA_LIMIT_BYTES)
    with pytest.raises(ValueError, match="16384"):
        check_user_data_size("x" * (USER_DATA_LIMIT_BYTES + 1), USER_DATA_LIMIT_BYTES)
    with pytest.raises(ValueError):
        check_user_data_size("é" * (USER_DATA_LIMIT_BYTES // 2 + 1), USER_DATA_LIMIT_BYTES)  # bytes, not characters


def test_arm64_pool_renders() -> None:
    user_data = render_user_data(make_spec(), "workers")
    assert '"arch": "arm64"' in user_data
    assert "pool workers" in user_data


def test_unknown_pool_raises() -> None:
    with pytest.raises(ValueError, match="unknown pool 'db'"):
        render_user_data(make_spec(), "db")


def test_sentinel_check_command() -> None:
    # Behaviour (exit 0 only once the script succeeded) is checked by the script-run tests below.
    assert SENTINEL_CHECK_COMMAND.split() == ["test", "-s", SENTINEL_PATH]


# --- running the script against stubs ---------------------------------------------------------

# One stub program, symlinked under each command name. It logs argv (and whether the sentinel
# already exists, to prove the sentinel comes last), applies injected failures, and keeps a tiny
# model of Docker state so idempotency on re-runs is observable.
STUB_SOURCE = f"""#!{sys.executable}
import json, os, sys
from pathlib import Path

exe = Path(sys.argv[0])
argv = [exe.name, *sys.argv[1:]]
state_dir = Path(os.environ["STUB_STATE"])
sentinel = os.path.exists(os.environ["VMPLANE_SENTINEL_PATH"])
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({{"argv": argv, "sentinel": sentinel}}) + "\\n")

rules_path = state_dir / "rules.json"
rules = json.loads(rules_path.read_text()) if rules_path.exists() else []
for rule in rules:
    if argv[: len(rule["argv"])] == rule["argv"] and rule["times"] != 0:
        rule["times"] -= 1  # negative means always
        rules_path.write_text(json.dumps(rules))
        print(f"stub: injected failure of {{' '.join(argv)}}", file=sys.stderr)
        sys.exit(1)

state_path = state_dir / "docker.json"
state = json.loads(state_path.read_text()) if state_path.exists() else {{"networks": [], "containers": {{}}}}
name, args = argv[0], argv[1:]
rc = 0
if name in ("dnf", "apt-get") and "install" in args:
    docker = exe.parent / "docker"
    if not docker.exists():
        docker.symlink_to(exe.resolve())
elif name == "docker":
    if args[:2] == ["network", "inspect"]:
        rc = 0 if args[-1] in state["networks"] else 1
    elif args[:2] == ["network", "create"]:
        state["networks"].append(args[-1])
    elif args[:2] == ["container", "inspect"]:
        if args[-1] in state["containers"]:
            print(state["containers"][args[-1]])
        else:
            print(f"Error: No such container: {{args[-1]}}", file=sys.stderr)
            rc = 1
    elif args[:1] == ["run"]:
        state["containers"][args[args.index("--name") + 1]] = args[-1]
    elif args[:2] == ["rm", "-f"]:
        state["containers"].pop(args[-1], None)
    elif args[:1] == ["info"]:
        print("27.3.1")
state_path.write_text(json.dumps(state))
sys.exit(rc)
"""

# Real tools the script itself needs; everything else is absent so the host is never touched.
REAL_TOOLS = ["tee", "mkdir", "dirname", "date", "mktemp", "chmod", "mv"]


@dataclass
class FakeHost:
    root: Path

    def __post_init__(self) -> None:
        self.stubs = self.root / "stubs"
        self.tools = self.root / "tools"
        self.state = self.root / "state"
        for d in (self.stubs, self.tools, self.state):
            d.mkdir()
        self.stub = self.root / "stub.py"
        self.stub.write_text(STUB_SOURCE)
        self.stub.chmod(0o755)
        for tool in REAL_TOOLS:
            real = shutil.which(tool)
            assert real, f"{tool} missing on this machine"
            (self.tools / tool).symlink_to(real)
        self.add("systemctl", "sleep")
        self.sentinel = self.root / "var/lib/vmplane/bootstrap-complete"
        self.log = self.root / "var/log/vmplane-bootstrap.log"
        self.conf_dir = self.root / "etc/vmplane/nginx/conf.d"
        self.calls_file = self.root / "calls.jsonl"

    def add(self, *names: str) -> None:
        for name in names:
            (self.stubs / name).symlink_to(self.stub)

    def fail(self, *argv: str, times: int = -1) -> None:
        path = self.state / "rules.json"
        rules = json.loads(path.read_text()) if path.exists() else []
        rules.append({"argv": list(argv), "times": times})
        path.write_text(json.dumps(rules))

    def run(self, mode: BootstrapMode) -> subprocess.CompletedProcess[str]:
        script = self.root / "bootstrap.sh"
        script.write_text(render_bootstrap_script(mode))
        env = {
            "PATH": f"{self.stubs}:{self.tools}",
            "STUB_LOG": str(self.calls_file),
            "STUB_STATE": str(self.state),
            "VMPLANE_SENTINEL_PATH": str(self.sentinel),
            "VMPLANE_LOG_PATH": str(self.log),
            "VMPLANE_NGINX_CONF_DIR": str(self.conf_dir),
        }
        return subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)

    def records(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def calls(self, *, with_sleep: bool = False) -> list[list[str]]:
        return [r["argv"] for r in self.records() if with_sleep or r["argv"][0] != "sleep"]

    def sleeps(self) -> list[str]:
        return [r["argv"][1] for r in self.records() if r["argv"][0] == "sleep"]

    def sentinel_check(self) -> int:
        command = SENTINEL_CHECK_COMMAND.replace(SENTINEL_PATH, str(self.sentinel))
        return subprocess.run([BASH, "-c", command], check=False).returncode


def heads(calls: list[list[str]], n: int = 3) -> list[list[str]]:
    return [c[:n] for c in calls]


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


def test_nginx_mode_runs_steps_in_order_and_writes_sentinel_last(host: FakeHost) -> None:
    host.add("dnf")
    assert host.sentinel_check() != 0
    result = host.run(BootstrapMode.nginx)
    assert_ok(result)

    assert heads(host.calls()) == [
        ["dnf", "install", "-y"],
        ["systemctl", "enable", "--now"],
        ["docker", "info", "--format"],
        ["docker", "network", "inspect"],
        ["docker", "network", "create"],
        ["docker", "pull", NGINX_IMAGE],
        ["docker", "container", "inspect"],
        ["docker", "run", "-d"],
        ["docker", "exec", NGINX_CONTAINER_NAME],
    ]
    calls = host.calls()
    assert calls[0] == ["dnf", "install", "-y", "docker"]
    assert calls[4] == ["docker", "network", "create", "--driver", "bridge", NETWORK_NAME]
    run = calls[7]
    for flag, value in [
        ("--name", NGINX_CONTAINER_NAME),
        ("--network", NETWORK_NAME),
        ("--restart", "unless-stopped"),
        ("-p", "80:80"),
        ("-v", f"{host.conf_dir}:/etc/nginx/conf.d:ro"),
    ]:
        assert run[run.index(flag) + 1] == value
    assert run[-1] == NGINX_IMAGE
    assert "http://127.0.0.1/healthz" in calls[8]

    # No command ever ran after the sentinel appeared.
    assert not any(r["sentinel"] for r in host.records())
    sentinel = json.loads(host.sentinel.read_text())
    assert sentinel["mode"] == "nginx"
    datetime.strptime(sentinel["completedAt"], "%Y-%m-%dT%H:%M:%SZ")
    assert host.sentinel_check() == 0

    log = host.log.read_text()
    assert "bootstrap complete" in log and "FAILED" not in log
    assert "27.3.1" in log  # command output goes to the log too
    assert host.sleeps() == []


def test_bare_mode_skips_nginx(host: FakeHost) -> None:
    host.add("dnf")
    assert_ok(host.run(BootstrapMode.bare))
    assert heads(host.calls()) == [
        ["dnf", "install", "-y"],
        ["systemctl", "enable", "--now"],
        ["docker", "info", "--format"],
        ["docker", "network", "inspect"],
        ["docker", "network", "create"],
    ]
    assert json.loads(host.sentinel.read_text())["mode"] == "bare"


def test_apt_host_installs_docker_io(host: FakeHost) -> None:
    host.add("apt-get")
    assert_ok(host.run(BootstrapMode.bare))
    apt = [c for c in host.calls() if c[0] == "apt-get"]
    assert apt[0][-1] == "update"
    assert apt[1][-4:] == ["install", "-y", "--no-install-recommends", "docker.io"]
    assert host.sentinel.exists()


def test_dnf_preferred_when_both_present(host: FakeHost) -> None:
    host.add("dnf", "apt-get")
    assert_ok(host.run(BootstrapMode.bare))
    assert not any(c[0] == "apt-get" for c in host.calls())


def test_existing_docker_is_not_reinstalled(host: FakeHost) -> None:
    host.add("dnf", "docker")
    assert_ok(host.run(BootstrapMode.bare))
    assert not any(c[0] == "dnf" for c in host.calls())


def test_network_create_failure_leaves_no_sentinel(host: FakeHost) -> None:
    host.add("dnf")
    host.fail("docker", "network", "create")
    result = host.run(BootstrapMode.nginx)
    assert result.returncode != 0
    assert not host.sentinel.exists()
    assert host.sentinel_check() != 0
    assert heads(host.calls())[-1] == ["docker", "network", "create"]  # stopped right there
    log = host.log.read_text()
    assert "FAILED" in log and "sentinel not written" in log


def test_no_package_manager_fails_without_sentinel(host: FakeHost) -> None:
    result = host.run(BootstrapMode.bare)
    assert result.returncode != 0
    assert host.calls() == []
    assert not host.sentinel.exists()
    assert "no supported package manager" in host.log.read_text()


def test_pull_retried_with_backoff(host: FakeHost) -> None:
    host.add("dnf")
    host.fail("docker", "pull", times=2)
    assert_ok(host.run(BootstrapMode.nginx))
    assert host.sleeps() == ["2", "4"]
    assert sum(c[:2] == ["docker", "pull"] for c in host.calls()) == 3
    assert host.sentinel.exists()


def test_package_install_retried_then_gives_up(host: FakeHost) -> None:
    host.add("dnf")
    host.fail("dnf", "install")
    result = host.run(BootstrapMode.nginx)
    assert result.returncode != 0
    assert sum(c[0] == "dnf" for c in host.calls()) == RETRY_ATTEMPTS
    assert host.sleeps() == ["2", "4", "8", "16", "32"][: RETRY_ATTEMPTS - 1]
    assert not any(c[0] == "docker" for c in host.calls())
    assert not host.sentinel.exists()
    assert "giving up" in host.log.read_text()


def test_rerun_is_idempotent(host: FakeHost) -> None:
    host.add("dnf")
    assert_ok(host.run(BootstrapMode.nginx))
    first = host.sentinel.read_text()
    host.calls_file.unlink()

    assert_ok(host.run(BootstrapMode.nginx))
    calls = host.calls()
    assert not any(c[0] == "dnf" for c in calls)
    assert ["docker", "network", "create"] not in heads(calls)
    assert ["docker", "run", "-d"] not in heads(calls)
    assert ["docker", "start", NGINX_CONTAINER_NAME] in calls
    assert json.loads(host.sentinel.read_text())["mode"] == json.loads(first)["mode"]
    assert "FAILED" not in host.log.read_text()


def test_rerun_replaces_container_with_other_image(host: FakeHost) -> None:
    host.add("dnf")
    (host.state / "docker.json").write_text(
        json.dumps({"networks": [NETWORK_NAME], "containers": {NGINX_CONTAINER_NAME: "nginx:1.25.0"}})
    )
    assert_ok(host.run(BootstrapMode.nginx))
    calls = heads(host.calls())
    assert calls.index(["docker", "rm", "-f"]) < calls.index(["docker", "run", "-d"])
    assert ["docker", "network", "create"] not in calls
