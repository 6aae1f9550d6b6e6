"""The fault hook: a pause right after one cloud call, for a sandbox process only.

With VMPLANE_TEST_HANG_AFTER_CALL set to a call's name, or `name#N` for its Nth call (AWS names
operations, `CreateVpc`; GCP names methods, `compute.instances.insert#2`; Proxmox `POST /pools`), a
process whose target is a sandbox hangs for an hour right after that call returns, having written
FAULT_MARKER, so whoever runs it can kill -9 it exactly between a cloud call and its checkpoint.

`sandbox_hook` is the one guard: every transport gets its hook from it, and it hands one out only when
the variable is set and the target says it is a sandbox (an emulator, never a real cloud however it is
reached). Unset (always, in production) nothing is asked and nothing is registered.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

FAULT_PAUSE_ENV = "VMPLANE_TEST_HANG_AFTER_CALL"
FAULT_MARKER = "fault-paused"


def parse_fault_target(value: str) -> tuple[str, int]:
    """`CreateVpc` -> ("CreateVpc", 1); `CreateSubnet#3` -> ("CreateSubnet", 3)."""
    name, _, nth = value.partition("#")
    count = int(nth) if nth else 1
    if not name or count < 1:
        raise ValueError(f"{FAULT_PAUSE_ENV}: expected Operation or Operation#N (N >= 1), got {value!r}")
    return name, count


class FaultPause:
    """Counts calls of one name across every client of the process; hangs after the Nth."""

    def __init__(self, value: str) -> None:
        self.name, self.nth = parse_fault_target(value)
        self.seen = 0
        self._lock = threading.Lock()

    def after(self, name: str) -> None:
        if name != self.name:
            return
        with self._lock:
            self.seen += 1
            hit = self.seen == self.nth
        if hit:
            (Path(os.environ.get("VMPLANE_HOME", ".")) / FAULT_MARKER).write_text(f"{name}#{self.nth}")
            time.sleep(3600)


_pause: FaultPause | None = None
_lock = threading.Lock()


def _process_hook() -> FaultPause | None:
    """The process's hook when the variable is set, else None; one per process, so `#N` counts across
    every client."""
    global _pause
    value = os.environ.get(FAULT_PAUSE_ENV)
    if not value:
        return None
    with _lock:
        if _pause is None:
            _pause = FaultPause(value)
        return _pause


def sandbox_hook(is_sandbox: Callable[[], bool]) -> FaultPause | None:
    """The hook for one target: None unless the variable is set and `is_sandbox()` says yes. `is_sandbox`
    is asked only when the variable is set, so a check that costs a call (Proxmox asks the API what it
    is) is never made in production."""
    hook = _process_hook()
    if hook is None or not is_sandbox():
        return None
    return hook
