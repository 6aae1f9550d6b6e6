"""clouds/aws/session.py: sandbox credentials are never the user's, and every API call is tallied."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.session import SANDBOX_CREDENTIALS, AwsClients, AwsTarget
from vmplane.clouds.base import API_CALLS
from vmplane.clouds.errors import UnsupportedError

SANDBOX = "http://127.0.0.1:4566"


@pytest.fixture
def real_looking_env(monkeypatch, tmp_path):
    """The developer's shell: real-looking keys in the environment and a credentials file on disk."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEYDONOTUSE1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret-do-not-use")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "real-session-token")
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIAFILEKEYDONOTUSE1\naws_secret_access_key = file-secret\n"
        "[prod]\naws_access_key_id = AKIAPRODKEYDONOTUSE1\naws_secret_access_key = prod-secret\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "prod")


def _credentials(client):
    return client._request_signer._credentials


@pytest.mark.parametrize("service", ["ec2", "iam", "ssm", "sts", "autoscaling"])
def test_a_sandbox_client_uses_the_dummy_credentials(real_looking_env, service):
    aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=SANDBOX))
    creds = _credentials(aws.client(service))
    assert creds.access_key == SANDBOX_CREDENTIALS["aws_access_key_id"] == "testing"
    assert creds.secret_key == "testing"
    assert creds.token is None
    assert aws.client(service).meta.endpoint_url == SANDBOX


def test_a_real_target_does_use_the_default_chain(real_looking_env, monkeypatch):
    # The contrast that makes the test above meaningful: outside the sandbox the env keys are used.
    monkeypatch.delenv("AWS_PROFILE")
    aws = AwsClients(AwsTarget(region="us-east-1"))
    assert _credentials(aws.ec2).access_key == "AKIAREALKEYDONOTUSE1"


def test_a_real_target_with_a_profile_reads_that_profile(real_looking_env, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var)
    aws = AwsClients(AwsTarget(region="us-east-1", profile="prod"))
    assert _credentials(aws.ec2).access_key == "AKIAPRODKEYDONOTUSE1"


def test_clients_are_cached_per_service():
    aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=SANDBOX))
    assert aws.ec2 is aws.ec2 is aws.client("ec2")
    assert aws.ec2 is not aws.iam
    assert aws.ec2.meta.region_name == "us-east-1"


def test_api_calls_are_tallied_per_operation(aws):
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        aws.sts.get_caller_identity()
        aws.ec2.describe_vpcs()
        aws.ec2.describe_vpcs()
        aws.ec2.describe_availability_zones()
    finally:
        API_CALLS.reset(token)
    assert tally == Counter({"ec2.DescribeVpcs": 2, "sts.GetCallerIdentity": 1, "ec2.DescribeAvailabilityZones": 1})
    # Outside a step (no tally set) calls still work and are simply not counted.
    aws.ec2.describe_vpcs()
    assert tally["ec2.DescribeVpcs"] == 2


def test_failed_calls_are_tallied_too(aws):
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        with pytest.raises(aws.ec2.exceptions.ClientError):
            aws.ec2.describe_vpcs(VpcIds=["vpc-00000000000000000"])
    finally:
        API_CALLS.reset(token)
    assert tally["ec2.DescribeVpcs"] == 1


def test_the_describe_names_the_endpoint():
    assert AwsTarget(region="us-east-1", endpoint_url=SANDBOX).describe() == f"sandbox {SANDBOX} (us-east-1)"
    assert AwsTarget(region="eu-west-1").describe() == "AWS eu-west-1"


class _Flaky(ThreadingHTTPServer):
    """Answers the first request with a 5xx whose body is no AWS document, the next ones properly."""

    def __init__(self, first_body: bytes) -> None:
        self.first_body, self.requests = first_body, 0
        super().__init__(("127.0.0.1", 0), _FlakyHandler)


class _FlakyHandler(BaseHTTPRequestHandler):
    server: _Flaky

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests += 1
        if self.server.requests == 1:
            status, body = 500, self.server.first_body
        else:
            status = 200
            body = b'<DescribeVpcsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><vpcSet/></DescribeVpcsResponse>'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.mark.parametrize("first_body", [b"upstream exploded", b"<Response><Errors><Error><Code>Intern"])
def test_a_5xx_whose_body_is_no_aws_document_is_retried_like_any_5xx(first_body: bytes) -> None:
    server = _Flaky(first_body)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.server_port}"))
        assert aws.ec2.describe_vpcs()["Vpcs"] == []  # not "the endpoint answered with something that is not AWS"
        assert server.requests == 2
    finally:
        server.shutdown()
        server.server_close()


def test_an_html_5xx_page_still_reads_as_an_action_the_endpoint_does_not_implement() -> None:
    # moto behind Flask answers an unimplemented action with its HTML error page (rotation relies on it).
    server = _Flaky(b"<!doctype html>\n<html lang=en><title>500 Internal Server Error</title>")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        aws = AwsClients(AwsTarget(region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.server_port}"))
        with pytest.raises(UnsupportedError, match="not an AWS response"):
            aws_call(aws.ec2.describe_vpcs)
        assert server.requests == 1  # not retried
    finally:
        server.shutdown()
        server.server_close()
