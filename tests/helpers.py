"""Test helpers: the sandbox handle, a runner for the real `vmplane` CLI in a subprocess, env files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import forkserver
from tests.forkserver import Forked

from vmplane.sandbox.faults import NO_FAULTS_AGENT

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def inspection_client_info() -> Any:
    """google-api-core's client info for the tests' own inspection clients: never faulted (sandbox/faults.py)."""
    from google.api_core.gapic_v1.client_info import ClientInfo

    return ClientInfo(user_agent=NO_FAULTS_AGENT)


def inspection_http(credentials: Any) -> Any:
    """An authorized httplib2 for googleapiclient's inspection clients, saying NO_FAULTS_AGENT."""
    import google_auth_httplib2
    from googleapiclient.http import build_http, set_user_agent

    return set_user_agent(google_auth_httplib2.AuthorizedHttp(credentials, http=build_http()), NO_FAULTS_AGENT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


GCP_PROJECT = "vmplane-sandbox"
SESSION_GCP_PORTS: dict[int, int] = {}  # AWS port -> GCP port of the sandboxes this test process started


@dataclass
class Sandbox:
    port: int
    home: Path
    gcp_port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gcp_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.gcp_port}"

    def gcp_compute(self, client_cls: type[Any]) -> Any:
        """A google-cloud-compute REST client (e.g. compute_v1.NetworksClient) against the GCP sandbox."""
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials

        return client_cls(
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.gcp_endpoint),
            transport="rest",
            client_info=inspection_client_info(),
        )

    def gcp_discovery(self, api: str, version: str = "v1") -> Any:
        """A googleapiclient service (dns, iam, cloudresourcemanager) against the GCP sandbox."""
        from google.auth.credentials import AnonymousCredentials
        from googleapiclient.discovery import build

        return build(
            api,
            version,
            http=inspection_http(AnonymousCredentials()),
            static_discovery=True,
            client_options={"api_endpoint": self.gcp_endpoint},
        )

    def fault_tally(self) -> Counter[str]:
        """What this sandbox's fault profile has injected so far ("aws.throttle" -> count, both clouds)."""
        import urllib.request

        with urllib.request.urlopen(f"{self.endpoint}/_sandbox/faults", timeout=10) as r:
            return Counter(json.loads(r.read())["tally"])

    def gcp_control(self, action: str, body: dict[str, Any] | None = None, method: str = "POST") -> Any:
        """Call one of the GCP sandbox's /_sandbox/ endpoints."""
        import urllib.request

        data = json.dumps(body or {}).encode() if method == "POST" else None
        req = urllib.request.Request(f"{self.gcp_endpoint}/_sandbox/{action}", data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def client(self, service: str, region: str = "us-east-1") -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(user_agent_extra=NO_FAULTS_AGENT),  # inspection is never faulted (sandbox/faults.py)
        )


@dataclass
class Cli:
    home: Path
    sandbox_port: int
    # Default: the session sandbox's GCP port when sandbox_port is the session's, else a free port (so a
    # test that starts its own sandbox never collides on 4567).
    gcp_port: int = 0

    def __post_init__(self) -> None:
        if not self.gcp_port:
            self.gcp_port = SESSION_GCP_PORTS.get(self.sandbox_port) or free_port()

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VMPLANE_"))}
        env.update(
            VMPLANE_HOME=str(self.home),
            VMPLANE_SANDBOX_PORT=str(self.sandbox_port),
            VMPLANE_GCP_SANDBOX_PORT=str(self.gcp_port),
            COLUMNS="200",
        )
        return env

    def popen(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str] | Forked:
        if forkserver.enabled():
            return forkserver.popen(list(args), {**self.env, **(extra_env or {})})
        return subprocess.Popen(
            [sys.executable, "-m", "vmplane", *args],
            env={**self.env, **(extra_env or {})},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )

    def run(
        self, *args: str, timeout: float = 180, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        if forkserver.enabled():  # the same `python -m vmplane`, forked from a process that has its libraries loaded
            return forkserver.run(list(args), {**self.env, **(extra_env or {})}, timeout)
        return subprocess.run(
            [sys.executable, "-m", "vmplane", *args],
            env={**self.env, **(extra_env or {})},
            text=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )

    def recorded_status(self, ref: str) -> str:
        """A job's status (ref: job id or environment name) read from the records in this process, as
        `vmplane status` reads it: for tests about something else, where a process per read is only its
        start-up (`status` itself is exercised through the CLI in test_crash_resume.py and elsewhere)."""
        from vmplane.jobs.listings import find_job
        from vmplane.settings import Settings

        return str(find_job(Settings(home=self.home), ref).status)

    def json(
        self, *args: str, expect: int = 0, timeout: float = 180, extra_env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        proc = self.run(*args, "--output", "json", timeout=timeout, extra_env=extra_env)
        assert proc.returncode == expect, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        out: dict[str, Any] = json.loads(proc.stdout)
        return out


@contextmanager
def vmplane_serve(cli: Cli, log: Path) -> Iterator[str]:
    """A real `vmplane serve` (with its worker) for cli's home and sandbox on a free 127.0.0.1 port, its output
    in log: yields its base URL once /healthz answers, and stops it on exit."""
    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmplane", "serve", "--port", str(port)],
        env=cli.env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vmplane serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def write_env(tmp_path: Path, name: str, org: str = "acme", example: str = "fixed.jsonc", **overrides: Any) -> Path:
    """A copy of an example with another identity (tests share one sandbox account). A load balancer's
    domain becomes <name>.sandbox.vmplane.test, in the sandbox account's hosted zone."""
    from vmplane.envspec.load import load_spec

    spec = load_spec(EXAMPLES / example).model_dump(mode="json", by_alias=True, exclude_none=True)
    spec.update(name=name, org=org, **overrides)
    if "loadBalancer" in spec and "loadBalancer" not in overrides:
        spec["loadBalancer"]["domain"] = f"{name}.sandbox.vmplane.test"
    path = tmp_path / f"{name}.jsonc"
    path.write_text(json.dumps(spec, indent=2))
    return path


def module_env_name(tmp: Path, base: str) -> str:
    """`base` for a module fixture's first set-up on this worker, `base-N` for its N-th one: under
    `--dist worksteal` a worker can run a module's tests apart and set its module fixtures up again, while
    the first set-up's environment still stands in the worker's sandbox (applying it again under the same
    name from a new home is refused: the names belong to another job). `tmp` is the fixture's
    `tmp_path_factory.mktemp(...)`, numbered from 0 by pytest."""
    digits = len(tmp.name) - len(tmp.name.rstrip("0123456789"))
    n = tmp.name[-digits:] if digits else "0"
    return base if n == "0" else f"{base}-{n}"


def terraform_env(tmp_path: Path) -> tuple[dict[str, str] | None, str]:
    """An environment in which `terraform init` works offline through the provider mirror, or (None, why).

    The mirror is the folder holding `registry.terraform.io` (VMPLANE_TF_MIRROR, else /opt/tf-plugins,
    else found under / at depth 3), as ARCHITECTURE.md describes."""
    import shutil

    if not shutil.which("terraform"):
        return None, "terraform is not on PATH"
    candidates = [os.environ.get("VMPLANE_TF_MIRROR", ""), "/opt/tf-plugins"]
    mirror = next((c for c in candidates if c and (Path(c) / "registry.terraform.io").is_dir()), None)
    if mirror is None:
        found = subprocess.run(
            ["find", "/", "-maxdepth", "3", "-type", "d", "-name", "registry.terraform.io"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        mirror = str(Path(found[0]).parent) if found else None
    if mirror is None:
        return None, "no Terraform provider mirror (a folder holding registry.terraform.io) on this machine"
    rc = tmp_path / "terraformrc"
    rc.write_text(
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n    include = ["registry.terraform.io/*/*"]\n  }}\n'
        '  direct {\n    exclude = ["registry.terraform.io/*/*"]\n  }\n'
        "}\n"
    )
    # VMPLANE_*: a session fixture may have set VMPLANE_HOME in this process; it must not override a Cli's home.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TF_", "VMPLANE_"))}
    env.update(TF_CLI_CONFIG_FILE=str(rc), TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1")
    return env, ""


def start_postgres(base: Path) -> tuple[str, list[str]] | tuple[None, str]:
    """A throwaway PostgreSQL cluster (Debian's server binaries, off PATH) on a free 127.0.0.1 port.

    Returns (SQLAlchemy URL, stop command) or (None, why it cannot run here). As root, the server runs
    as the `postgres` user (initdb refuses root)."""
    import pwd
    import shutil

    bins = sorted(str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not bins:
        return None, "no PostgreSQL server binaries (Debian's postgresql package) on this machine"
    bindir = Path(bins[-1]).parent
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no postgres user to run the server as"
        as_user = ["runuser", "-u", "postgres", "--"]
    base.mkdir(parents=True, exist_ok=True)
    data, sock = base / "data", base / "sock"
    sock.mkdir(exist_ok=True)
    if as_user:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        base.chmod(0o755)
        for parent in base.parents:  # the postgres user must be able to reach the folder (o+x, not read)
            if parent != Path("/") and not parent.stat().st_mode & 0o001:
                parent.chmod(parent.stat().st_mode | 0o001)
    port = free_port()
    run = lambda *cmd: subprocess.run([*as_user, *cmd], capture_output=True, text=True, check=False)  # noqa: E731
    init = run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    if init.returncode != 0:
        return None, f"initdb failed: {init.stderr.strip()[-300:]}"
    opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    start = run(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(base / "log"), "-w", "start")
    if start.returncode != 0:
        return None, f"pg_ctl start failed: {start.stderr.strip()[-300:]}"
    created = run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "vmplane")
    if created.returncode != 0:
        return None, f"createdb failed: {created.stderr.strip()[-300:]}"
    stop = [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/vmplane", stop


def gcp_sandbox_alone() -> Iterator[str]:
    """A GCP sandbox of the module's own, in this process (no moto): its endpoint, stopped after."""
    from vmplane.sandbox.gcp.server import GcpSandbox

    server = GcpSandbox(port=free_port())
    server.start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()
