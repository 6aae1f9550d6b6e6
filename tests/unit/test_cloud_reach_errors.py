"""Reaching a cloud, per SDK (issue 23, item 6): a refused connection or an unresolvable host is an
UnreachableError naming the endpoint, raised at the first attempt; a timeout or a 5xx stays transient and each
retry says so on stderr ("retrying <endpoint>: <why> (attempt n, ...)"); refused keys name where they came
from. The CLI-level tests are tests/integration/test_credential_errors.py and
tests/proxmox/test_pve_credential_errors.py."""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import botocore.retries.standard
import httplib2
import pytest
import requests
from google.api_core import exceptions as gexc
from proxmoxer.core import ResourceException
from tests.helpers import free_port

from vmplane.clouds import waits
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.errors import AuthError, TransientError, UnreachableError, endpoint_name, unreachable_reason
from vmplane.clouds.gcp import session as gcp_session
from vmplane.clouds.proxmox import session as pve_session
from vmplane.clouds.proxmox.errors import translate as pve_translate
from vmplane.observe import logs

from .test_observe_calls import OK, Script, error


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The log lines (as JSON objects) the code under test writes; no backoff sleeps."""
    import io

    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0)
    monkeypatch.setattr(waits.random, "uniform", lambda a, b: 0.0)  # the transport's jitter (waits.retry)
    out = io.StringIO()
    logs.configure("json", "info", out)
    yield lambda: [json.loads(x) for x in out.getvalue().splitlines()]
    logs.reset()


def _refused() -> requests.ConnectionError:
    try:
        requests.get(f"http://127.0.0.1:{free_port()}/", timeout=5)
    except requests.ConnectionError as e:
        return e
    raise AssertionError("something listens on a free port")


def test_the_reason_is_found_under_each_sdks_wrapping() -> None:
    assert unreachable_reason(_refused()) == "connection refused"
    assert unreachable_reason(socket.gaierror(-2, "Name or service not known")) == "host name does not resolve"
    assert unreachable_reason(httplib2.ServerNotFoundError("Unable to find the server at x.invalid")) == (
        "host name does not resolve"
    )
    assert unreachable_reason(requests.ReadTimeout("read timed out")) is None
    assert unreachable_reason(ConnectionResetError(104, "reset")) is None


def test_an_endpoint_is_named_without_its_query_or_user() -> None:
    assert endpoint_name("https://u:p@ec2.amazonaws.com:8443/x?X-Amz-Signature=s") == "https://ec2.amazonaws.com:8443/x"


# ---- AWS ----


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [(f"http://127.0.0.1:{free_port()}", "connection refused"), ("http://aws.vmplane.invalid", "does not resolve")],
    ids=["dead-port", "unresolvable"],
)
def test_aws_nothing_answering_is_one_attempt_naming_the_url(said: Any, endpoint: str, why: str) -> None:
    aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=endpoint))
    with pytest.raises(
        UnreachableError, match=re.escape(f"cannot reach the AWS endpoint {endpoint}/: ") + ".*" + why
    ) as err:
        aws_call(aws.sts.get_caller_identity)
    assert not err.value.retryable
    assert not [line for line in said() if "retrying" in line["message"]]  # botocore's 5 retries skipped


def test_aws_a_5xx_is_retried_with_a_line_per_attempt(said: Any) -> None:
    script = Script()
    script.answers = [error(503, "ServiceUnavailable"), error(503, "ServiceUnavailable"), OK]
    try:
        aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=script.url))
        aws_call(aws.sts.get_caller_identity)
    finally:
        script.server.shutdown()
    lines = [x["message"] for x in said() if x["message"].startswith("retrying")]
    assert lines == [
        f"retrying {script.url}/: HTTP 503 ServiceUnavailable (attempt 1 of 6)",
        f"retrying {script.url}/: HTTP 503 ServiceUnavailable (attempt 2 of 6)",
    ]


def test_aws_refused_keys_name_the_environment_never_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret-value")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    script = Script()
    script.answers = [error(403, "InvalidClientTokenId")]
    monkeypatch.setenv("AWS_ENDPOINT_URL", script.url)  # a real target: the default chain finds the env keys
    try:
        aws = AwsClients(AwsTarget(region="us-east-1"))
        with pytest.raises(AuthError) as err:
            aws_call(aws.sts.get_caller_identity)
    finally:
        script.server.shutdown()
    text = str(err.value)
    assert "AWS refused the credentials from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)" in text
    assert "not-a-real-secret-value" not in text and err.value.code == "InvalidClientTokenId"


# ---- Google Cloud ----


def _gcp() -> gcp_session.GcpClients:
    return gcp_session.GcpClients(gcp_session.GcpTarget("p", "europe-west1", endpoint_url="http://127.0.0.1:9"))


def test_gcp_a_refused_connection_is_one_attempt(said: Any) -> None:
    attempts: list[int] = []

    def get() -> Any:
        attempts.append(1)
        raise _refused()

    with pytest.raises(UnreachableError, match=re.escape("cannot reach the Google Cloud endpoint http://127.0.0.1:")):
        _gcp().call("compute.networks.get", get)
    assert attempts == [1]


def test_gcp_a_5xx_is_retried_with_a_line_per_attempt(said: Any) -> None:
    answers: list[Any] = [gexc.ServiceUnavailable("backend down"), "done"]

    def get() -> Any:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert _gcp().call("compute.networks.get", get) == "done"
    (line,) = [x["message"] for x in said() if x["message"].startswith("retrying")]
    assert line.startswith("retrying http://127.0.0.1:9: compute.networks.get: backend down [503] (attempt 1, until ")
    assert line.endswith("Z)")


# ---- Proxmox VE ----

PVE = "https://pve.example:8006"


def test_pve_a_401_names_the_variables_and_the_endpoint() -> None:
    err = pve_translate(ResourceException(401, "Unauthorized", "authentication failure"), "GET /nodes", endpoint=PVE)
    assert isinstance(err, AuthError)
    assert str(err) == (
        f"GET /nodes: the Proxmox VE API at {PVE} refused the API token (authentication failure); "
        "check PROXMOX_TOKEN_ID and PROXMOX_TOKEN_SECRET [401]"
    )


def test_pve_a_403_stays_the_privilege_pve_names() -> None:
    err = pve_translate(ResourceException(403, "Forbidden", "Permission check failed (/vms/101, VM.Clone)"), "X")
    assert isinstance(err, AuthError) and "PROXMOX_TOKEN" not in str(err) and "VM.Clone" in str(err)


class _Resource:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    def __call__(self, _path: str) -> _Resource:
        return self

    def get(self, **_: Any) -> Any:
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


def _pve(answers: list[Any]) -> pve_session.Pve:
    pve = pve_session.Pve(pve_session.PveTarget(PVE, ("pve1",)))
    pve._api = _Resource(answers)  # the proxmoxer client, answering from the script
    return pve


def test_pve_a_refused_connection_is_one_attempt(said: Any) -> None:
    answers: list[Any] = [_refused(), "never asked"]
    with pytest.raises(UnreachableError, match=re.escape(f"cannot reach the Proxmox VE API {PVE}: connection refused")):
        _pve(answers).get("nodes")
    assert answers == ["never asked"]


def test_pve_a_timeout_is_retried_with_a_line_per_attempt(said: Any) -> None:
    pve = _pve([requests.ReadTimeout("read timed out"), ResourceException(503, "Unavailable", "busy"), ["pve1"]])
    assert pve.get("nodes") == ["pve1"]
    lines = [x["message"] for x in said() if x["message"].startswith("retrying")]
    assert [line.split(" (attempt")[0] for line in lines] == [
        f"retrying {PVE}: GET /nodes: cannot reach the Proxmox VE API {PVE}: ReadTimeout",
        f"retrying {PVE}: GET /nodes: busy [503]",
    ]
    assert "(attempt 2, until " in lines[1]


def test_a_transient_error_is_still_transient() -> None:
    assert isinstance(pve_translate(requests.ConnectTimeout("connect timed out"), "X", endpoint=PVE), TransientError)
