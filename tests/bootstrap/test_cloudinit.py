"""Cloud-init user-data: schema validity, content rules, and the bootstrap script run against stubs.

The script tests execute the real rendered bash script on a `FakeHost` (tests/bootstrap/fakehost.py):
stub package managers and Docker, the pinned packages served by a local HTTP server.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.bootstrap.fakehost import NGINX_DIGEST, PINS, FakeHost, assert_ok, heads

from vmplane.bootstrap.cloudinit import (
    BOOTSTRAP_LOG_PATH,
    BOOTSTRAP_SCRIPT_PATH,
    IDENTITY_PATH,
    NETWORK_NAME,
    NGINX_CONF_PATH,
    NGINX_CONTAINER_NAME,
    RETRY_ATTEMPTS,
    SENTINEL_CHECK_COMMAND,
    check_user_data_size,
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
    entry = files_by_path(user_data)[BOOTSTRAP_SCRIPT_PATH]
    assert entry["encoding"] == "gz+b64"
    return gzip.decompress(base64.b64decode(entry["content"])).decode()


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
    script = script_of(user_data)
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
        "fetch_pinned() {",
        'dnf install -y "${files[@]}"',
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
    assert f"NGINX_CONTAINER={NGINX_CONTAINER_NAME}\n" in script
    assert "BOOTSTRAP_MODE=nginx\n" in script
    # The sentinel is the last step of the main sequence.
    main = script[script.index("\nfetch_pinned\n") :]
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
    # A quarter left for the manifest's families (tests/bootstrap/test_vmconfig_helper.py measures a full one).
    assert len(user_data.encode()) < USER_DATA_LIMIT_BYTES * 3 // 4


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
    assert SENTINEL_CHECK_COMMAND.split()[:4] == ["test", "-s", SENTINEL_PATH, "||"]


# --- running the script against stubs ---------------------------------------------------------

NGINX_REF = f"docker.io/library/nginx@{NGINX_DIGEST}"


def pinned_files(host: FakeHost, family: str) -> list[str]:
    ext = "deb" if PINS[family][0] == "apt" else "rpm"
    return [str(host.packages / f"{n}_{v}.{family}.{ext}") for n, v in PINS[family][1]]


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
        ["docker", "pull", NGINX_REF],
        ["docker", "container", "inspect"],
        ["docker", "run", "-d"],
        ["docker", "exec", NGINX_CONTAINER_NAME],
    ]
    calls = host.calls()
    # Exactly the verified files of the pinned al2023 packages, and their versions checked after.
    assert calls[0] == ["dnf", "install", "-y", *pinned_files(host, "al2023")]
    assert [q[-1] for q in host.queries()] == [n for n, _ in PINS["al2023"][1]]
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
    assert run[-1] == NGINX_REF
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
    assert "vmconfig: verified docker 25.0.6-1.amzn2023.0.2 (al2023)" in log
    assert host.sleeps() == []
    assert (host.packages.stat().st_mode & 0o777) == 0o700


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


def test_apt_host_installs_the_pinned_debs(host: FakeHost) -> None:
    """(a) The right files: apt-get installs exactly them, dpkg-query confirms the pins, sentinel written."""
    host.boot_as("debian-12")
    host.add("apt-get", "dnf")  # the manifest's family decides, not which tools are present
    assert_ok(host.run(BootstrapMode.nginx))
    apt = [c for c in host.calls() if c[0] == "apt-get"]
    assert apt[0][-1] == "update"
    assert apt[1][-3 - len(PINS["debian-12"][1]) :] == [
        "install",
        "-y",
        "--no-install-recommends",
        *pinned_files(host, "debian-12"),
    ]
    assert not any(c[0] == "dnf" for c in host.calls())
    assert [q[:2] for q in host.queries()] == [["dpkg-query", "-W"]] * 2
    assert host.sentinel.exists()


def test_changed_byte_fails_closed_naming_the_package(host: FakeHost) -> None:
    """(b) One byte changed in the archive: non-zero exit, the log names the package, no install, no sentinel."""
    host.add("dnf")
    manifest = host.manifest(BootstrapMode.nginx)
    served = host.repo.root / "containerd_1.7.23-1.amzn2023.0.1.al2023.rpm"
    data = bytearray(served.read_bytes())
    data[10] ^= 1
    served.write_bytes(bytes(data))
    result = host.run(BootstrapMode.nginx, manifest)
    assert result.returncode != 0
    assert not host.sentinel.exists() and host.sentinel_check() != 0
    assert host.calls() == []  # nothing installed or started
    log = host.log.read_text()
    url = f"{host.repo.url}/containerd_1.7.23-1.amzn2023.0.1.al2023.rpm"
    assert f"checksum mismatch: containerd 1.7.23-1.amzn2023.0.1 {url}: expected sha256 " in log
    assert "sentinel not written" in log
    # What the control plane's sentinel check prints for the step's error: the artifact that failed.
    check = host.sentinel_check_run()
    assert check.returncode != 0
    assert f"checksum mismatch: containerd 1.7.23-1.amzn2023.0.1 {url}" in check.stdout


@pytest.mark.parametrize(
    ("family", "why"),
    [
        ("ubuntu-24.04", "unpinned: family ubuntu-24.04 (ubuntu 24.04): archive.ubuntu.com timed out"),
        ("rocky-9", "unpinned: os rocky 9.4 is not a family vmplane pins"),
    ],
)
def test_unpinned_family_fails_closed(host: FakeHost, family: str, why: str) -> None:
    """(c) A family the manifest lacks: no sentinel, the log says why."""
    host.boot_as(family)
    host.add("apt-get", "dnf")
    result = host.run(BootstrapMode.bare)
    assert result.returncode != 0
    assert host.calls() == [] and not host.sentinel.exists()
    log = host.log.read_text()
    assert why in log and "sentinel not written" in log


def test_unpinned_nginx_image_fails_closed_before_downloading(host: FakeHost) -> None:
    host.add("dnf")
    manifest = host.manifest(BootstrapMode.nginx).model_copy(
        update={"images": {}, "unavailable": {"nginx": "registry-1.docker.io unreachable"}}
    )
    result = host.run(BootstrapMode.nginx, manifest)
    assert result.returncode != 0 and not host.sentinel.exists()
    assert "unpinned: nginx image: registry-1.docker.io unreachable" in host.log.read_text()
    assert not host.packages.exists() or list(host.packages.iterdir()) == []


def test_installed_version_other_than_the_pin_fails(host: FakeHost) -> None:
    host.add("dnf")
    (host.state / "versions.json").write_text(json.dumps({"docker": "25.0.8-1.amzn2023.0.1", "containerd": "x"}))
    result = host.run(BootstrapMode.bare)
    assert result.returncode != 0 and not host.sentinel.exists()
    assert "docker is installed at version 25.0.8-1.amzn2023.0.1, the manifest pins 25.0.6-1.amzn2023.0.2" in (
        host.log.read_text()
    )


def test_existing_docker_is_kept_and_its_version_logged(host: FakeHost) -> None:
    host.add("dnf", "docker")
    assert_ok(host.run(BootstrapMode.bare))
    assert not any(c[0] == "dnf" for c in host.calls())
    assert "docker already installed, kept: Docker version 24.0.5, build stub" in host.log.read_text()


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
