"""boto3 clients for one target (a real account or the sandbox), with deadlines, retries and call counts
(botocore retries; its events hand each call to the transport, clouds/transport.py).

In sandbox mode the session is built from fixed dummy credentials and an explicit endpoint, so the
user's real AWS credentials are never read. Every API call is counted per step (for `bench/`).
"""

from __future__ import annotations

import json
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

import boto3
import botocore.session
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import ProfileNotFound

from vmplane.clouds.aws.consistency import RecentIds
from vmplane.clouds.aws.errors import BAD_CREDENTIALS, aws_errors, profile_not_found
from vmplane.clouds.errors import CloudError, endpoint_name, unreachable_reason
from vmplane.clouds.transport import Transport
from vmplane.clouds.waits import note_retry

if TYPE_CHECKING:  # the stubs (types-boto3, a test extra) are for mypy only: never imported at run time
    from types_boto3_acm import ACMClient
    from types_boto3_autoscaling import AutoScalingClient
    from types_boto3_ec2 import EC2Client
    from types_boto3_elbv2 import ElasticLoadBalancingv2Client
    from types_boto3_iam import IAMClient
    from types_boto3_kms import KMSClient
    from types_boto3_route53 import Route53Client
    from types_boto3_s3 import S3Client
    from types_boto3_scheduler import EventBridgeSchedulerClient
    from types_boto3_secretsmanager import SecretsManagerClient
    from types_boto3_ssm import SSMClient
    from types_boto3_sts import STSClient


class _Keys(TypedDict):  # a TypedDict, so that `**SANDBOX_CREDENTIALS` is checked against Session's keywords
    aws_access_key_id: str
    aws_secret_access_key: str


SANDBOX_CREDENTIALS: _Keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

MAX_ATTEMPTS = 6
_BOTO_CONFIG = Config(
    connect_timeout=5,
    read_timeout=60,
    # "standard" retries throttling, 5xx and connection errors with jittered backoff (but see _fail_fast).
    retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
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
    # Set only for the sandbox. A real target's endpoint is botocore's own choice, which honours
    # AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_<SERVICE>): the SDK's documented override, which aims a real
    # target (the default credential chain) at another endpoint (a proxy, a local stub).
    endpoint_url: str | None = None

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


def _fail_fast(caught_exception: Any = None, request_dict: Any = None, **_: Any) -> None:
    """Registered first on needs-retry: a refused connection or an unresolvable host is a wrong endpoint
    or a stopped service, not a hiccup, so it fails now (one line naming the URL, aws_errors) instead of
    after the standard mode's five backed-off retries. Raising here ends the call with that error."""
    if caught_exception is not None and unreachable_reason(caught_exception) is not None:
        request_dict["context"].setdefault("vmplane_failures", []).append((type(caught_exception).__name__, False))
        raise caught_exception


_RETRIED_STATUS = frozenset({500, 502, 503, 504})  # the statuses botocore's standard mode retries


def _say_retry(response: Any = None, caught_exception: Any = None, attempts: int = 0, **kw: Any) -> None:
    """Progress while botocore retries a timeout, a reset or a 5xx: one line per retried attempt, naming
    the endpoint (throttling is routine backoff and stays quiet)."""
    if attempts >= MAX_ATTEMPTS:
        return  # the last attempt: the call fails now, with its own message
    if caught_exception is not None:
        why = type(caught_exception).__name__
    elif response is not None and response[0].status_code in _RETRIED_STATUS:
        code, throttled = _code_of(response[0].status_code, response[1])
        if throttled:  # EC2 throttles with a 503: routine backoff too
            return
        why = f"HTTP {response[0].status_code} {code}"
    else:
        return
    url = kw.get("request_dict", {}).get("url", "")
    note_retry(endpoint_name(str(url)), why, attempts, of=MAX_ATTEMPTS)


def _code_of(status: int, parsed: Any) -> tuple[str, bool]:
    code = str(parsed.get("Error", {}).get("Code") or status) if isinstance(parsed, dict) else str(status)
    return code, status == 429 or code in _THROTTLING


def _translate(exc: Exception, _name: str) -> CloudError:
    """botocore's error as vmplane's, as `aws_errors` says it (the transport's translator for AWS)."""
    try:
        with aws_errors():
            raise exc
    except CloudError as err:
        return err
    except Exception:  # not botocore's: nothing to translate it from
        return CloudError(f"AWS SDK error: {type(exc).__name__}")
    raise AssertionError("aws_errors swallowed an error")  # pragma: no cover


class AwsClients:
    """Lazily created, thread-safe cache of boto3 clients for one target."""

    def __init__(self, target: AwsTarget) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._clients: dict[str, BaseClient] = {}
        self._source: str | None = None
        # botocore retries on its own (standard mode, above); its events hand each call to the transport
        # for the count, metrics, span and fault hook, and `aws_errors` translates at the call site.
        self.transport = Transport(
            "aws",
            translate=_translate,
            endpoint=lambda name: target.endpoint_url or name,
            is_sandbox=lambda: target.sandbox,
        )
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
            try:  # an unknown profile fails here, before any call: one line naming it and where it was set
                self._session = boto3.session.Session(region_name=target.region, profile_name=target.profile)
            except ProfileNotFound as err:
                source = "provider.profile" if target.profile else "AWS_PROFILE"
                raise profile_not_found(str(err.kwargs.get("profile", "")), source) from err

    def credentials_source(self) -> str:
        """Where the default chain found the keys, for an error that says AWS refused them (never a value)."""
        if self._source is None:
            try:
                creds = self._session.get_credentials()
            except Exception:  # the chain itself fails: the call's own error says why
                creds = None
            method = getattr(creds, "method", None)
            profile = self._session.profile_name
            if method == "env":
                self._source = "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
            elif method == "shared-credentials-file":
                where = os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")
                self._source = f"profile {profile!r} in {where}"
            elif method == "config-file":
                self._source = f"profile {profile!r} in {os.environ.get('AWS_CONFIG_FILE', '~/.aws/config')}"
            else:
                self._source = f"profile {profile!r} ({method or 'the default chain'})"
        return self._source

    def _name_credentials(self, http_response: Any, parsed: Any, **_: Any) -> None:
        """after-call: an answer refusing the keys carries where they came from into the error (translate)."""
        if http_response.status_code >= 400 and isinstance(parsed, dict):
            error = parsed.get("Error")
            if isinstance(error, dict) and error.get("Code") in BAD_CREDENTIALS and not self.target.sandbox:
                error["VmplaneCredentials"] = self.credentials_source()

    # ---- botocore events: each call's start and end, to the transport ----
    def _count_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        name = f"{model.service_model.endpoint_prefix}.{model.name}"
        # The call's own dict, handed to every later event of this call (botocore's request context).
        context["vmplane_call"] = name
        context["vmplane_span"] = self.transport.begin(name)

    def _call_done(self, http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        failures = context.get("vmplane_failures", ())
        if http_response.status_code < 300:
            self._end(context, failures, None)
        else:
            self._end(context, failures[:-1], _code_of(http_response.status_code, parsed))

    def _call_error(self, exception: BaseException, context: dict[str, Any], **_: Any) -> None:
        # No answer at all (connection errors until the retries ran out): after-call does not fire.
        self._end(context, context.get("vmplane_failures", ())[:-1], (type(exception).__name__, False))

    def _end(self, context: dict[str, Any], retried: Any, final: tuple[str, bool] | None) -> None:
        name = context.get("vmplane_call")
        if name is None:
            return
        self.transport.end(
            name,
            context.pop("vmplane_span", None),
            retried=[t for _, t in retried],
            error=final[0] if final else None,
            throttled=final[1] if final else False,
        )

    def _after_ok(self, model: Any, **_: Any) -> None:
        self.transport.after(model.name)  # the hook names AWS calls by operation: `CreateVpc`

    def client(self, service: str) -> BaseClient:
        """One service's client, named at run time; the properties below give each its stub's type."""
        # The stubs overload `client` on literal service names only; every overload returns a BaseClient.
        make: Callable[..., BaseClient] = self._session.client
        with self._lock:
            if service not in self._clients:
                with aws_errors():  # e.g. a profile whose config is unusable
                    c = make(service, endpoint_url=self.target.endpoint_url, config=_BOTO_CONFIG)
                c.meta.events.register_first("needs-retry", _fail_fast)
                if service == "ec2":  # ids unknown for a moment after their create (consistency.py)
                    recent = RecentIds()
                    c.meta.events.register("after-call.*.*", recent.after_call)
                    # botocore-stubs type handlers as returning None; a needs-retry handler returns its delay.
                    c.meta.events.register_first("needs-retry", recent.needs_retry)  # type: ignore[arg-type]
                c.meta.events.register("before-call.*.*", self._count_call)
                c.meta.events.register("needs-retry", _note_attempt)
                c.meta.events.register("needs-retry", _say_retry)
                c.meta.events.register("after-call.*.*", self._name_credentials)
                c.meta.events.register("after-call.*.*", self._call_done)
                c.meta.events.register("after-call-error", self._call_error)
                c.meta.events.register("before-parse.*.*", _blank_unreadable_5xx)
                if self.transport.hook() is not None:  # nothing registered unless the hook may act
                    c.meta.events.register("after-call.*.*", self._after_ok)
                self._clients[service] = c
            return self._clients[service]

    @property
    def ec2(self) -> EC2Client:
        return cast("EC2Client", self.client("ec2"))

    @property
    def iam(self) -> IAMClient:
        return cast("IAMClient", self.client("iam"))

    @property
    def ssm(self) -> SSMClient:
        return cast("SSMClient", self.client("ssm"))

    @property
    def secretsmanager(self) -> SecretsManagerClient:
        return cast("SecretsManagerClient", self.client("secretsmanager"))

    @property
    def sts(self) -> STSClient:
        return cast("STSClient", self.client("sts"))

    @property
    def autoscaling(self) -> AutoScalingClient:
        return cast("AutoScalingClient", self.client("autoscaling"))

    @property
    def elbv2(self) -> ElasticLoadBalancingv2Client:
        return cast("ElasticLoadBalancingv2Client", self.client("elbv2"))

    @property
    def acm(self) -> ACMClient:
        return cast("ACMClient", self.client("acm"))

    @property
    def route53(self) -> Route53Client:
        return cast("Route53Client", self.client("route53"))

    @property
    def scheduler(self) -> EventBridgeSchedulerClient:
        return cast("EventBridgeSchedulerClient", self.client("scheduler"))

    @property
    def kms(self) -> KMSClient:
        return cast("KMSClient", self.client("kms"))

    @property
    def s3(self) -> S3Client:
        return cast("S3Client", self.client("s3"))
