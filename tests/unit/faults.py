"""Error injection on a real boto3 client (the in-process moto behind it stays untouched): a
`before-call` handler that returns a response short-circuits botocore's HTTP request, and botocore
raises a ClientError from it exactly as from an AWS answer, so the error still crosses `translate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class _Http:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.content = b""


@dataclass
class Inject:
    """Answer the first `times` calls of `operation` with an AWS error; count every call."""

    operation: str
    code: str
    message: str = "injected"
    times: int = 1
    status: int = 400
    calls: int = 0
    params: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[_Http, dict[str, Any]] | None:
        if model.name != self.operation:
            return None
        self.calls += 1
        self.params.append(params)
        if self.calls > self.times:
            return None  # let the call through to moto
        body = {"Error": {"Code": self.code, "Message": self.message}, "ResponseMetadata": {}}
        return _Http(self.status), body


def inject(client: Any, fault: Inject) -> Inject:
    client.meta.events.register_first(f"before-call.*.{fault.operation}", fault)
    return fault


class FakeClock:
    """Stands in for the `time` module inside clouds/waits.py: `sleep` advances `monotonic`."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
