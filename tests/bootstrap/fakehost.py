"""A fake VM for running the real rendered bootstrap script: stub `docker`, `dnf`, `apt-get`, `dpkg-query`,
`rpm`, `systemctl` and `sleep` executables (which log their argv) plus the few real tools the script needs
(python3 for the vmconfig helper), the pool's manifest, an /etc/os-release and a local HTTP server serving
the pinned package files. Nothing on this machine is installed, started or written outside tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

from vmplane.bootstrap.cloudinit import BOOTSTRAP_LOG_PATH, SENTINEL_CHECK_COMMAND, render_bootstrap_script
from vmplane.bootstrap.vmconfig import helper_source
from vmplane.deps.manifest import Family, Image, Manifest, Package, PackageSource
from vmplane.envspec.models import SENTINEL_PATH, Arch, BootstrapMode

BASH = shutil.which("bash") or "/bin/bash"
NGINX_DIGEST = "sha256:" + "ab" * 32
OS_RELEASES = {
    "al2023": 'NAME="Amazon Linux"\nID="amzn"\nVERSION_ID="2023"\n',
    "debian-12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "ubuntu-24.04": 'ID=ubuntu\nVERSION_ID="24.04"\n',
    "rocky-9": 'ID="rocky"\nVERSION_ID="9.4"\n',
}
# Per family: the package manager and the (name, version) pairs its manifest pins.
PINS = {
    "al2023": ("dnf", [("docker", "25.0.6-1.amzn2023.0.2"), ("containerd", "1.7.23-1.amzn2023.0.1")]),
    "debian-12": ("apt", [("docker.io", "20.10.24+dfsg1-1+deb12u1"), ("containerd", "1.6.20~ds1-1+b1")]),
}

# One stub program, symlinked under each command name. It logs argv (and whether the sentinel
# already exists, to prove the sentinel comes last), applies injected failures, and keeps a tiny
# model of Docker and package state so idempotency on re-runs is observable.
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
versions_path = state_dir / "versions.json"  # what dpkg-query / rpm report as installed
versions = json.loads(versions_path.read_text()) if versions_path.exists() else {{}}
name, args = argv[0], argv[1:]
rc = 0
if name in ("dnf", "apt-get") and "install" in args:
    docker = exe.parent / "docker"
    if not docker.exists():
        docker.symlink_to(exe.resolve())
elif name in ("dpkg-query", "rpm"):
    if args[-1] in versions:
        print(versions[args[-1]], end="")
    else:
        print(f"package {{args[-1]}} is not installed", file=sys.stderr)
        rc = 1
elif name == "docker":
    if args[:1] == ["--version"]:
        print("Docker version 24.0.5, build stub")
    elif args[:2] == ["network", "inspect"]:
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


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Repo:
    """Package files served over HTTP from `root`, as a distribution's archive would."""

    root: Path
    url: str

    def add(self, name: str, data: bytes) -> Package:
        path = self.root / name
        path.write_bytes(data)
        return Package(
            name=name.split("_", 1)[0], version="0", url=f"{self.url}/{name}", sha256=hashlib.sha256(data).hexdigest()
        )


def make_manifest(repo: Repo, kind: BootstrapMode, families: tuple[str, ...] = ("al2023", "debian-12")) -> Manifest:
    """A manifest pinning `families`, each package a small file the repo serves (its real sha256 and size)."""
    pinned = {}
    for family in families:
        manager, pins = PINS[family]
        ext = "deb" if manager == "apt" else "rpm"
        packages = []
        for name, version in pins:
            data = f"{family} {name} {version}\n".encode() * 50
            p = repo.add(f"{name}_{version}.{family}.{ext}", data)
            packages.append(p.model_copy(update={"name": name, "version": version, "size": len(data)}))
        pinned[family] = Family(
            packageManager=manager, source=PackageSource(repository=repo.url, suites=["stub"]), packages=packages
        )
    images = {"nginx": Image(repository="docker.io/library/nginx", tag="1.27.3-alpine", digest=NGINX_DIGEST)}
    return Manifest(
        kind=kind,
        arch=Arch.amd64,
        generatedAt=datetime(2026, 12, 1, tzinfo=UTC),
        families=pinned,
        images=images if kind is BootstrapMode.nginx else {},
        unavailable={"ubuntu-24.04": "archive.ubuntu.com timed out"},
    )


@dataclass
class FakeHost:
    root: Path
    repo: Repo

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
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
        (self.tools / "python3").symlink_to(sys.executable)
        self.add("systemctl", "sleep", "dpkg-query", "rpm")
        self.sentinel = self.root / "var/lib/vmplane/bootstrap-complete"
        self.log = self.root / "var/log/vmplane-bootstrap.log"
        self.conf_dir = self.root / "etc/vmplane/nginx/conf.d"
        self.vmconfig = self.root / "etc/vmplane/vmconfig.json"
        self.helper = self.root / "usr/local/lib/vmplane/vmconfig.py"
        self.packages = self.root / "var/lib/vmplane/packages"
        self.os_release = self.root / "etc/os-release"
        self.calls_file = self.root / "calls.jsonl"
        self.helper.parent.mkdir(parents=True)
        self.os_release.parent.mkdir(parents=True)
        self.helper.write_text(helper_source())
        self.manifests: dict[BootstrapMode, Manifest] = {}
        self.boot_as("al2023")

    def boot_as(self, family: str) -> None:
        """The image's /etc/os-release, and dpkg-query / rpm reporting the pinned versions once installed."""
        self.os_release.write_text(OS_RELEASES[family])
        pins = PINS.get(family, ("", []))[1]
        (self.state / "versions.json").write_text(json.dumps(dict(pins)))

    def manifest(self, mode: BootstrapMode) -> Manifest:
        if mode not in self.manifests:
            self.manifests[mode] = make_manifest(self.repo, mode)
        return self.manifests[mode]

    def add(self, *names: str) -> None:
        for name in names:
            (self.stubs / name).symlink_to(self.stub)

    def fail(self, *argv: str, times: int = -1) -> None:
        path = self.state / "rules.json"
        rules = json.loads(path.read_text()) if path.exists() else []
        rules.append({"argv": list(argv), "times": times})
        path.write_text(json.dumps(rules))

    def run(self, mode: BootstrapMode, manifest: Manifest | None = None) -> subprocess.CompletedProcess[str]:
        script = self.root / "bootstrap.sh"
        script.write_text(render_bootstrap_script(mode))
        self.vmconfig.parent.mkdir(parents=True, exist_ok=True)
        self.vmconfig.write_text((manifest or self.manifest(mode)).dumps())
        env = {
            "PATH": f"{self.stubs}:{self.tools}",
            "STUB_LOG": str(self.calls_file),
            "STUB_STATE": str(self.state),
            "VMPLANE_SENTINEL_PATH": str(self.sentinel),
            "VMPLANE_LOG_PATH": str(self.log),
            "VMPLANE_NGINX_CONF_DIR": str(self.conf_dir),
            "VMPLANE_VMCONFIG_PATH": str(self.vmconfig),
            "VMPLANE_VMCONFIG_HELPER": str(self.helper),
            "VMPLANE_PACKAGE_DIR": str(self.packages),
            "VMPLANE_OS_RELEASE": str(self.os_release),
            "VMPLANE_RETRY_BACKOFF": "0",
        }
        return subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)

    def records(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def calls(self, *, with_sleep: bool = False) -> list[list[str]]:
        skip = {"sleep", "dpkg-query", "rpm"} - ({"sleep"} if with_sleep else set())
        return [r["argv"] for r in self.records() if r["argv"][0] not in skip]

    def queries(self) -> list[list[str]]:
        return [r["argv"] for r in self.records() if r["argv"][0] in ("dpkg-query", "rpm")]

    def sleeps(self) -> list[str]:
        return [r["argv"][1] for r in self.records() if r["argv"][0] == "sleep"]

    def sentinel_check(self) -> int:
        return self.sentinel_check_run().returncode

    def sentinel_check_run(self) -> subprocess.CompletedProcess[str]:
        command = SENTINEL_CHECK_COMMAND.replace(SENTINEL_PATH, str(self.sentinel))
        command = command.replace(BOOTSTRAP_LOG_PATH, str(self.log))
        return subprocess.run([BASH, "-c", command], capture_output=True, text=True, check=False)


def heads(calls: list[list[str]], n: int = 3) -> list[list[str]]:
    return [c[:n] for c in calls]


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
