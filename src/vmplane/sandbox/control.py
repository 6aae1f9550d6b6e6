"""Start, stop, inspect and reset the sandbox: one process on 127.0.0.1 serving moto (AWS) on
`sandbox_port` and the embedded Google Cloud sandbox on `gcp_sandbox_port`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.base import Cloud
from vmplane.errors import VmplaneError
from vmplane.settings import Settings

GCP_PROJECT = "vmplane-sandbox"  # any valid project id works; this one is shown as the default

START_TIMEOUT = 30.0


class SandboxError(VmplaneError):
    pass


@dataclass(frozen=True)
class SandboxInfo:
    running: bool
    port: int
    pid: int | None = None
    started_at: float | None = None
    gcp_port: int | None = None
    faults: dict[str, Any] | None = None  # the fault profile in use (faults.Profile.summary), if any

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gcp_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.gcp_port}"

    def endpoint_for(self, cloud: Cloud) -> str:
        if cloud == Cloud.aws:
            return self.endpoint
        if cloud == Cloud.gcp:
            return self.gcp_endpoint
        raise UnsupportedError(f"the sandbox emulates AWS and Google Cloud; provider.cloud is {cloud.value}")

    def to_json(self) -> dict[str, object]:
        # `endpoint`/`port` (AWS) stay at the top level for callers that predate the GCP sandbox.
        return {
            **asdict(self),
            "endpoint": self.endpoint,
            "aws": {"endpoint": self.endpoint},
            "gcp": {"endpoint": self.gcp_endpoint, "project": GCP_PROJECT},
        }


def _state_file(settings: Settings) -> Path:
    return settings.home / "sandbox.json"


def _answers(port: int) -> bool:
    """True if a moto server answers on the port (its management API, not just any listener)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1) as r:
            return r.status == 200 and b"<html" in r.read(256)
    except (OSError, ValueError):
        return False


def _gcp_answers(port: int) -> bool:
    """True if the Google Cloud sandbox answers on the port (its own status endpoint)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_sandbox/status", timeout=1) as r:
            return r.status == 200 and b'"sandbox": "gcp"' in r.read(256)
    except (OSError, ValueError):
        return False


def _both(settings: Settings) -> bool:
    return _answers(settings.sandbox_port) and _gcp_answers(settings.gcp_sandbox_port)


def status(settings: Settings) -> SandboxInfo:
    port = settings.sandbox_port
    pid = started = faults = None
    state = _state_file(settings)
    if state.exists():
        try:
            data = json.loads(state.read_text())
            if data.get("port") == port:
                pid, started, faults = data.get("pid"), data.get("started_at"), data.get("faults")
        except (OSError, ValueError):
            pass
    gcp = settings.gcp_sandbox_port
    return SandboxInfo(running=_both(settings), port=port, pid=pid, started_at=started, gcp_port=gcp, faults=faults)


def start(settings: Settings, faults: Path | None = None) -> SandboxInfo:
    """Start the sandbox unless it runs; with `faults`, under that fault profile (sandbox/faults.py).
    Without `faults`, a running sandbox is taken as it is, whatever profile it has."""
    profile = None
    if faults is not None:
        from vmplane.sandbox.faults import load

        profile = load(faults).summary()  # a bad file fails here, naming the file and field
    current = status(settings)
    if current.running:
        if faults is not None and current.faults != profile:
            running = f"fault profile {current.faults['file']}" if current.faults else "no fault profile"
            raise SandboxError(
                f"the sandbox is already running with {running}; stop it first "
                f"(vmplane sandbox stop), then vmplane sandbox start --faults {faults}"
            )
        return current
    if _answers(settings.sandbox_port) and current.pid:
        raise SandboxError(
            "the running sandbox has no Google Cloud side (started by an older vmplane?); "
            "restart it: vmplane sandbox stop && vmplane sandbox start"
        )
    home = settings.ensure_home()
    log = (home / "sandbox.log").open("ab")
    # Only what moto needs: the user's AWS credentials never reach the sandbox process.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vmplane.sandbox.serve",
            "--port",
            str(settings.sandbox_port),
            "--gcp-port",
            str(settings.gcp_sandbox_port),
            *(["--faults", str(faults.resolve())] if faults is not None else []),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # survives the CLI process: "left running for the next command"
        env=env,
    )
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.05
    while not _both(settings):
        if proc.poll() is not None:
            raise SandboxError(f"the sandbox exited with code {proc.returncode}; see {home / 'sandbox.log'}")
        if time.monotonic() > deadline:
            proc.terminate()
            raise SandboxError(
                f"the sandbox did not answer on 127.0.0.1:{settings.sandbox_port} and :{settings.gcp_sandbox_port} "
                f"in {START_TIMEOUT:.0f}s"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    info = SandboxInfo(
        running=True,
        port=settings.sandbox_port,
        pid=proc.pid,
        started_at=time.time(),
        gcp_port=settings.gcp_sandbox_port,
        faults=profile,
    )
    from vmplane.sandbox.seed import seed

    seed(info.endpoint)
    record = {
        "pid": proc.pid,
        "port": info.port,
        "gcp_port": info.gcp_port,
        "started_at": info.started_at,
        "faults": profile,
    }
    _state_file(settings).write_text(json.dumps(record))
    return info


def stop(settings: Settings) -> SandboxInfo:
    current = status(settings)
    if current.pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(current.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _answers(current.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _answers(current.port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(current.pid, signal.SIGKILL)  # never leave an orphaned emulator behind
            time.sleep(0.2)
    elif current.running:
        raise SandboxError(f"something answers on port {current.port} but was not started by vmplane; not stopping it")
    _state_file(settings).unlink(missing_ok=True)
    return status(settings)


def reset(settings: Settings) -> SandboxInfo:
    """Forget every emulated resource (moto's reset API, the GCP sandbox's); the server keeps running."""
    current = status(settings)
    if not current.running:
        raise SandboxError("the sandbox is not running (vmplane sandbox start)")
    req = urllib.request.Request(f"{current.endpoint}/moto-api/reset", method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass
    req = urllib.request.Request(f"{current.gcp_endpoint}/_sandbox/reset", method="POST", data=b"{}")
    with urllib.request.urlopen(req, timeout=10):
        pass
    from vmplane.sandbox.seed import seed

    seed(current.endpoint)  # the account's domain comes back, as after `start`
    return current


def fault_report(info: SandboxInfo) -> dict[str, Any]:
    """What a fault profile has injected so far, per sandbox: {"aws": {...}, "gcp": {...}}, each with
    `profile`, `tally` ("<cloud>.<fault>" -> count) and the latest `events`."""
    out: dict[str, Any] = {}
    for cloud, url in (("aws", info.endpoint), ("gcp", info.gcp_endpoint)):
        with urllib.request.urlopen(f"{url}/_sandbox/faults", timeout=10) as r:
            out[cloud] = json.loads(r.read())
    return out
