"""boto3 clients for one target (a real account or the sandbox), with deadlines, retries and call counts.

In sandbox mode the session is built from fixed dummy credentials and an explicit endpoint, so the
user's real AWS credentials are never read. Every API call is counted per step (for `bench/`).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

from vmplane.clouds.base import API_CALLS

# TEST HOOK, for the crash tests only (tests/integration/test_crash_*.py): with this variable set to
# `Operation` or `Operation#N`, a *sandbox* process hangs for an hour right after the first (or Nth)
# call of that AWS operation returns, having written FAULT_MARKER, so a test can kill -9 it exactly
# between a cloud call and its checkpoint. Unset (always, outside tests) or against real AWS it is inert:
# nothing is even registered.
FAULT_PAUSE_ENV = "VMPLANE_TEST_HANG_AFTER_CALL"
FAULT_MARKER = "fault-paused"

SANDBOX_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

_BOTO_CONFIG = Config(
    connect_timeout=5,
    read_timeout=60,
    # "standard" retries throttling, 5xx and connection errors with jittered backoff.
    retries={"mode": "standard", "max_attempts": 6},
    user_agent_extra="vmplane",
)


@dataclass(frozen=True)
class AwsTarget:
    region: str
    profile: str | None = None
    endpoint_url: str | None = None  # set only for the sandbox

    @property
    def sandbox(self) -> bool:
        return self.endpoint_url is not None

    def describe(self) -> str:
        return f"sandbox {self.endpoint_url} ({self.region})" if self.sandbox else f"AWS {self.region}"


def _count_call(model: Any, **_: Any) -> None:
    tally = API_CALLS.get()
    if tally is not None:
        tally[f"{model.service_model.endpoint_prefix}.{model.name}"] += 1


def parse_fault_target(value: str) -> tuple[str, int]:
    """`CreateVpc` -> ("CreateVpc", 1); `CreateSubnet#3` -> ("CreateSubnet", 3)."""
    name, _, nth = value.partition("#")
    count = int(nth) if nth else 1
    if not name or count < 1:
        raise ValueError(f"{FAULT_PAUSE_ENV}: expected Operation or Operation#N (N >= 1), got {value!r}")
    return name, count


class _FaultPause:
    """The test hook itself: counts calls of one operation across every client of the process."""

    def __init__(self, value: str) -> None:
        self.operation, self.nth = parse_fault_target(value)
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, model: Any, **_: Any) -> None:
        if model.name != self.operation:
            return
        with self._lock:
            self.seen += 1
            hit = self.seen == self.nth
        if hit:
            marker = Path(os.environ.get("VMPLANE_HOME", ".")) / FAULT_MARKER
            marker.write_text(f"{model.name}#{self.nth}")
            time.sleep(3600)


_fault_pause: _FaultPause | None = None
_fault_lock = threading.Lock()


def _fault_hook() -> _FaultPause | None:
    global _fault_pause
    value = os.environ.get(FAULT_PAUSE_ENV)
    if not value:
        return None
    with _fault_lock:
        if _fault_pause is None:
            _fault_pause = _FaultPause(value)
        return _fault_pause


class AwsClients:
    """Lazily created, thread-safe cache of boto3 clients for one target."""

    def __init__(self, target: AwsTarget) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        if target.sandbox:
            # A bare botocore session that ignores AWS_PROFILE and the shared config/credentials files:
            # nothing of the user's AWS set-up is read, or can break, in sandbox mode.
            # (config key, env var, default, converter): no env var and no file means nothing is read.
            core = botocore.session.Session(
                session_vars={
                    "profile": (None, None, None, None),
                    "config_file": (None, None, os.devnull, None),
                    "credentials_file": (None, None, os.devnull, None),
                }
            )
            self._session = boto3.session.Session(
                region_name=target.region, botocore_session=core, **SANDBOX_CREDENTIALS
            )
        else:
            self._session = boto3.session.Session(region_name=target.region, profile_name=target.profile)

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                c = self._session.client(service, endpoint_url=self.target.endpoint_url, config=_BOTO_CONFIG)
                c.meta.events.register("before-call.*.*", _count_call)
                hook = _fault_hook() if self.target.sandbox else None
                if hook is not None:
                    c.meta.events.register("after-call.*.*", hook)
                self._clients[service] = c
            return self._clients[service]

    @property
    def ec2(self) -> Any:
        return self.client("ec2")

    @property
    def iam(self) -> Any:
        return self.client("iam")

    @property
    def ssm(self) -> Any:
        return self.client("ssm")

    @property
    def sts(self) -> Any:
        return self.client("sts")

    @property
    def autoscaling(self) -> Any:
        return self.client("autoscaling")

    @property
    def elbv2(self) -> Any:
        return self.client("elbv2")

    @property
    def acm(self) -> Any:
        return self.client("acm")

    @property
    def route53(self) -> Any:
        return self.client("route53")
