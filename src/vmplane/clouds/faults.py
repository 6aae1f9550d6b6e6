"""The crash tests' hook, shared by every driver (tests/integration/test_crash_*.py).

TEST HOOK: with VMPLANE_TEST_HANG_AFTER_CALL set to a call's name, or `name#N` for its Nth call (AWS
names operations, `CreateVpc`; GCP names methods, `compute.instances.insert#2`), a *sandbox* process
hangs for an hour right after that call returns, having written FAULT_MARKER, so a test can kill -9
it exactly between a cloud call and its checkpoint. Drivers consult it only for a sandbox target;
unset (always, outside tests) nothing is even registered.
"""

from __future__ import annotations

import os
import threading
import time
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


def fault_hook() -> FaultPause | None:
    """The process's hook when the variable is set, else None (callers check the target is a sandbox)."""
    global _pause
    value = os.environ.get(FAULT_PAUSE_ENV)
    if not value:
        return None
    with _lock:
        if _pause is None:
            _pause = FaultPause(value)
        return _pause
