"""boto3 clients for one target (a real account or the sandbox), with deadlines, retries and call counts.

In sandbox mode the session is built from fixed dummy credentials and an explicit endpoint, so the
user's real AWS credentials are never read. Every API call is counted per step (for `bench/`).
"""

from __future__ import annotations

import json
import os
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

from vmplane.clouds.base import count_call
from vmplane.clouds.faults import fault_hook
from vmplane.observe import calls

SANDBOX_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

_BOTO_CONFIG = Config(
    connect_timeout=5,
    read_timeout=60,
    # "standard" retries throttling, 5xx and connection errors with jittered backoff.
    retries={"mode": "standard", "max_attempts": 6},
    user_agent_extra="vmplane",
)


def _blank_unreadable_5xx(response_dict: dict[str, Any], operation_model: Any, **_: Any) -> None:
    """A 5xx whose body is not the protocol's XML or JSON (plain text, a truncated answer) would fail to
    parse, and a parse error is never retried. With the body emptied, botocore reads it as a generic
    server error, which its standard retry mode retries like any 5xx. An HTML page is left alone: it is
    how the sandbox (moto behind Flask) answers an action it does not implement, which `aws_errors`
    reports as unsupported."""
    if response_dict.get("status_code", 0) < 500 or not response_dict.get("body"):
        return
    body = response_dict["body"]
    if body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return
    try:
        if "json" in operation_model.service_model.resolved_protocol:
            json.loads(body)
        else:
            ET.fromstring(body)  # botocore parses this same body the same way next
    except (ValueError, ET.ParseError):
        response_dict["body"] = b""


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


# botocore's standard retry mode treats these codes (and HTTP 429) as throttling.
_THROTTLING = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "EC2ThrottledException",
    }
)


def _count_call(model: Any, context: dict[str, Any], **_: Any) -> None:
    name = f"{model.service_model.endpoint_prefix}.{model.name}"
    count_call(name)
    # The call's own dict, handed to every later event of this call (botocore's request context).
    context["vmplane_call"] = name
    context["vmplane_span"] = calls.started("aws", name)


def _note_attempt(response: Any = None, caught_exception: Any = None, request_dict: Any = None, **_: Any) -> None:
    """needs-retry fires after every attempt: remember each failed one (its code, whether throttled); the
    call's end (`after-call`) then knows which attempts were retried. Returns None: the retry handler decides."""
    if caught_exception is None and (response is None or response[0].status_code < 300):
        return
    if caught_exception is not None:
        failure = (type(caught_exception).__name__, False)
    else:
        failure = _code_of(response[0].status_code, response[1])
    request_dict["context"].setdefault("vmplane_failures", []).append(failure)


def _code_of(status: int, parsed: Any) -> tuple[str, bool]:
    code = str(parsed.get("Error", {}).get("Code") or status) if isinstance(parsed, dict) else str(status)
    return code, status == 429 or code in _THROTTLING


def _call_done(http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
    failures = context.get("vmplane_failures", ())
    if http_response.status_code < 300:
        _end(context, failures, None)
    else:
        _end(context, failures[:-1], _code_of(http_response.status_code, parsed))


def _call_error(exception: BaseException, context: dict[str, Any], **_: Any) -> None:
    # No answer at all (connection errors until the retries ran out): after-call does not fire.
    _end(context, context.get("vmplane_failures", ())[:-1], (type(exception).__name__, False))


def _end(context: dict[str, Any], retried: Any, final: tuple[str, bool] | None) -> None:
    name = context.get("vmplane_call")
    if name is None:
        return
    calls.done(
        "aws",
        name,
        context.pop("vmplane_span", None),
        retried=[t for _, t in retried],
        error=final[0] if final else None,
        throttled=final[1] if final else False,
    )


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
                c.meta.events.register("needs-retry", _note_attempt)
                c.meta.events.register("after-call.*.*", _call_done)
                c.meta.events.register("after-call-error", _call_error)
                c.meta.events.register("before-parse.*.*", _blank_unreadable_5xx)
                hook = fault_hook() if self.target.sandbox else None
                if hook is not None:
                    c.meta.events.register("after-call.*.*", lambda model, _h=hook, **_: _h.after(model.name))
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

    @property
    def scheduler(self) -> Any:
        return self.client("scheduler")
