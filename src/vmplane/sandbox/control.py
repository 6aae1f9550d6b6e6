"""Start, stop, inspect and reset the sandbox (moto's server on 127.0.0.1)."""

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

from vmplane.errors import VmplaneError
from vmplane.settings import Settings

START_TIMEOUT = 30.0


class SandboxError(VmplaneError):
    pass


@dataclass(frozen=True)
class SandboxInfo:
    running: bool
    port: int
    pid: int | None = None
    started_at: float | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "endpoint": self.endpoint}


def _state_file(settings: Settings) -> Path:
    return settings.home / "sandbox.json"


def _answers(port: int) -> bool:
    """True if a moto server answers on the port (its management API, not just any listener)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1) as r:
            return r.status == 200 and b"<html" in r.read(256)
    except (OSError, ValueError):
        return False


def status(settings: Settings) -> SandboxInfo:
    port = settings.sandbox_port
    pid = started = None
    state = _state_file(settings)
    if state.exists():
        try:
            data = json.loads(state.read_text())
            if data.get("port") == port:
                pid, started = data.get("pid"), data.get("started_at")
        except (OSError, ValueError):
            pass
    return SandboxInfo(running=_answers(port), port=port, pid=pid, started_at=started)


def start(settings: Settings) -> SandboxInfo:
    current = status(settings)
    if current.running:
        return current
    home = settings.ensure_home()
    log = (home / "sandbox.log").open("ab")
    # Only what moto needs: the user's AWS credentials never reach the sandbox process.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmplane.sandbox.serve", "--port", str(settings.sandbox_port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # survives the CLI process: "left running for the next command"
        env=env,
    )
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.05
    while not _answers(settings.sandbox_port):
        if proc.poll() is not None:
            raise SandboxError(f"the sandbox exited with code {proc.returncode}; see {home / 'sandbox.log'}")
        if time.monotonic() > deadline:
            proc.terminate()
            raise SandboxError(
                f"the sandbox did not answer on 127.0.0.1:{settings.sandbox_port} in {START_TIMEOUT:.0f}s"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    info = SandboxInfo(running=True, port=settings.sandbox_port, pid=proc.pid, started_at=time.time())
    from vmplane.sandbox.seed import seed

    seed(info.endpoint)
    _state_file(settings).write_text(json.dumps({"pid": proc.pid, "port": info.port, "started_at": info.started_at}))
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
    """Forget every emulated resource (moto's reset API); the server keeps running."""
    current = status(settings)
    if not current.running:
        raise SandboxError("the sandbox is not running (vmplane sandbox start)")
    req = urllib.request.Request(f"{current.endpoint}/moto-api/reset", method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass
    from vmplane.sandbox.seed import seed

    seed(current.endpoint)  # the account's domain comes back, as after `start`
    return current
