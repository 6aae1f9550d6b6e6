"""AWS and Google Cloud credentials and endpoints fail in one line through the real CLI (issue 23, item 6):
an unknown profile (AWS), no credentials, a wrong secret, a dead endpoint (a closed 127.0.0.1 port) and an
unresolvable host (`.invalid` never resolves, RFC 2606). Each is a real (non-sandbox) target, so the default
credential chains run as a user's would; nothing leaves this machine:

- AWS: the endpoint is the SDK's own override, AWS_ENDPOINT_URL (botocore honours it for every service).
- Google Cloud: the API endpoint is vmplane's test hook VMPLANE_GCP_TEST_ENDPOINT (Google's clients have no
  such variable), and the service-account key's `token_uri` points at a local token endpoint.

The "wrong secret" answers come from local stubs that answer as AWS and Google do to keys they do not
accept (the bodies below are those services' documented error shapes); what is tested is what vmplane makes of
that answer. Whether real AWS or Google would refuse a given key cannot be shown here.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests import deps_servers
from tests.credential_failures import FAST, one_error_line, timed
from tests.helpers import EXAMPLES, Cli, free_port

from vmplane.bootstrap import vmconfig_fetch
from vmplane.envspec.load import load_spec

FAKE_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key: nothing real
FAKE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DEAD = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
UNRESOLVABLE = "http://api.vmplane.invalid"


class _Stub(BaseHTTPRequestHandler):
    """Answers every request with `answer(self, body)` -> (status, headers, body)."""

    def do_POST(self) -> None:
        self._reply()

    def do_GET(self) -> None:
        self._reply()

    def _reply(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        status, headers, out = self.server.answer(self, body)  # type: ignore[attr-defined]
        self.send_response(status)
        for k, v in {**headers, "content-length": str(len(out))}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_port}"


# ---- AWS ----


def _aws_refuses_the_keys(req: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """AWS's answer to an access key it does not know, in each protocol's error shape."""
    if req.headers.get("X-Amz-Target"):  # JSON protocol (SSM, ...)
        doc = {
            "__type": "UnrecognizedClientException",
            "message": "The security token included in the request is invalid.",
        }
        return 400, {"content-type": "application/x-amz-json-1.1"}, json.dumps(doc).encode()
    if b"Version=2016-11-15" in body:  # EC2
        xml = (
            "<Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the provided "
            "access credentials</Message></Error></Errors><RequestID>1</RequestID></Response>"
        )
        return 401, {"content-type": "text/xml"}, xml.encode()
    xml = (  # query and REST-XML protocols (STS, IAM, Auto Scaling, Route 53, ...)
        "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token "
        "included in the request is invalid.</Message></Error><RequestId>1</RequestId></ErrorResponse>"
    )
    return 403, {"content-type": "text/xml"}, xml.encode()


def _cli(tmp_path: Path) -> Cli:
    """A CLI with its own home. fixed.jsonc and gcp-fixed.jsonc run nginx, whose image digest this machine
    cannot fetch; the refusal that causes (issue 23 item 1, not these tests' subject) would come before any
    cloud call, so the home pins what they need first, fetched from the fake upstreams as a connected site
    would from the real ones."""
    home = tmp_path / "home"
    with deps_servers.serve("amd64") as upstream, pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMPLANE_DEPS_MIRRORS", upstream.mirrors())
        for example in ("fixed.jsonc", "gcp-fixed.jsonc"):
            assert vmconfig_fetch.fetch_missing(load_spec(EXAMPLES / example), home) == []
    return Cli(home=home, sandbox_port=free_port())  # no sandbox runs: a port the CLI never dials


def _aws_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """Only what the test gives: empty config and credentials files, and no instance metadata (this machine
    is no EC2 instance; botocore would otherwise wait on 169.254.169.254)."""
    (tmp_path / "aws-config").write_text("")
    (tmp_path / "aws-credentials").write_text("")
    base = {
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL": DEAD,  # whatever a test forgets, nothing goes to AWS
    }
    return {**base, **env}


def _aws_apply(tmp_path: Path, env_file: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    cli = _cli(tmp_path)
    return timed(lambda: cli.run("apply", "-f", str(env_file), "--yes", timeout=120, extra_env=env))


@pytest.mark.parametrize("where", ["AWS_PROFILE", "provider.profile"])
def test_aws_an_unknown_profile_is_named_with_the_file_it_is_missing_from(tmp_path: Path, where: str) -> None:
    env_file = EXAMPLES / "fixed.jsonc"
    env = _aws_env(tmp_path)
    if where == "AWS_PROFILE":
        env["AWS_PROFILE"] = "no-such-profile"
    else:
        spec = json.loads(json.dumps(_load(env_file)))
        spec["provider"]["profile"] = "no-such-profile"
        env_file = tmp_path / "profile.jsonc"
        env_file.write_text(json.dumps(spec))
    proc, _ = _aws_apply(tmp_path, env_file, env)
    one_error_line(proc, "AWS profile 'no-such-profile'", f"({where})", str(tmp_path / "aws-config"))
    assert "ProfileNotFound" in proc.stderr  # the code, not botocore's traceback
    # Refused where the session is built, before the job exists: nothing recorded.
    assert _cli(tmp_path).json("jobs", "--output", "json")["jobs"] == []


def test_aws_no_credentials_names_the_default_chain(tmp_path: Path) -> None:
    proc, _ = _aws_apply(tmp_path, EXAMPLES / "fixed.jsonc", _aws_env(tmp_path))
    one_error_line(proc, "no AWS credentials found", "AWS_ACCESS_KEY_ID", "~/.aws/credentials", "provider.profile")


def test_aws_refused_keys_name_where_they_came_from_never_the_secret(tmp_path: Path, stub: ThreadingHTTPServer) -> None:
    stub.answer = _aws_refuses_the_keys  # type: ignore[attr-defined]
    env = _aws_env(
        tmp_path, AWS_ENDPOINT_URL=_url(stub), AWS_ACCESS_KEY_ID=FAKE_KEY_ID, AWS_SECRET_ACCESS_KEY=FAKE_SECRET
    )
    proc, _ = _aws_apply(tmp_path, EXAMPLES / "fixed.jsonc", env)
    one_error_line(
        proc,
        "AWS refused the credentials from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        secrets=(FAKE_SECRET,),
    )


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [(DEAD, "connection refused"), (UNRESOLVABLE, "host name does not resolve")],
    ids=["dead-port", "unresolvable"],
)
def test_aws_an_endpoint_nothing_answers_at_fails_fast_naming_it(tmp_path: Path, endpoint: str, why: str) -> None:
    env = _aws_env(
        tmp_path, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=FAKE_KEY_ID, AWS_SECRET_ACCESS_KEY=FAKE_SECRET
    )
    proc, elapsed = _aws_apply(tmp_path, EXAMPLES / "fixed.jsonc", env)
    one_error_line(proc, f"cannot reach the AWS endpoint {endpoint}/: {why}", secrets=(FAKE_SECRET,))
    assert elapsed < FAST, f"{elapsed:.1f}s"
    assert "retrying" not in proc.stderr  # not transient: no retry at all


def _load(path: Path) -> dict[str, object]:
    from vmplane.envspec.load import load_spec

    return load_spec(path).model_dump(mode="json", by_alias=True, exclude_none=True)


# ---- Google Cloud ----

GCP_FILE = EXAMPLES / "gcp-fixed.jsonc"


def _gcp_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """No gcloud configuration (an empty CLOUDSDK_CONFIG), and google-auth's metadata-server probe aimed at a
    closed port: this machine is no GCE VM, and off GCE the probe would otherwise wait on 169.254.169.254."""
    (tmp_path / "gcloud").mkdir(exist_ok=True)
    base = {
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "GCE_METADATA_HOST": DEAD.removeprefix("http://"),
        "GCE_METADATA_IP": DEAD.removeprefix("http://"),
        "VMPLANE_GCP_TEST_ENDPOINT": DEAD,  # whatever a test forgets, nothing goes to Google
    }
    return {**base, **env}


def _service_account_key(tmp_path: Path, token_uri: str) -> Path:
    """A service-account key file of the real shape, with a fresh RSA key Google has never seen."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    doc = {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key_id": "0123456789abcdef",
        "private_key": pem,
        "client_email": "vmplane@acme-prod.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path = tmp_path / "sa-key.json"
    path.write_text(json.dumps(doc))
    return path


def _google_token(grant: bool) -> Callable[[BaseHTTPRequestHandler, bytes], tuple[int, dict[str, str], bytes]]:
    """Google's OAuth token endpoint: a token, or its answer to a JWT signed with a key it does not know."""

    def answer(_req: BaseHTTPRequestHandler, _body: bytes) -> tuple[int, dict[str, str], bytes]:
        if grant:
            doc: dict[str, object] = {"access_token": "stub-access-token", "expires_in": 3600, "token_type": "Bearer"}
            return 200, {"content-type": "application/json"}, json.dumps(doc).encode()
        doc = {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        return 400, {"content-type": "application/json"}, json.dumps(doc).encode()

    return answer


def _gcp_apply(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    cli = _cli(tmp_path)
    return timed(lambda: cli.run("apply", "-f", str(GCP_FILE), "--yes", timeout=120, extra_env=env))


def test_gcp_no_credentials_names_the_variable_and_the_gcloud_command(tmp_path: Path) -> None:
    proc, _ = _gcp_apply(tmp_path, _gcp_env(tmp_path))
    line = one_error_line(proc, "GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login")
    assert "[redacted]" not in proc.stdout + proc.stderr  # issue 23: the sentence was over-redacted
    assert "no Google Cloud credentials found" in line


def test_gcp_a_missing_key_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-key.json"
    proc, _ = _gcp_apply(tmp_path, _gcp_env(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(missing)))
    one_error_line(proc, f"GOOGLE_APPLICATION_CREDENTIALS ({missing})", "was not found")
    assert "[redacted]" not in proc.stderr  # a path is no secret: the log line names it too


def test_gcp_a_refused_key_names_its_file(tmp_path: Path, stub: ThreadingHTTPServer) -> None:
    stub.answer = _google_token(grant=False)  # type: ignore[attr-defined]
    key = _service_account_key(tmp_path, f"{_url(stub)}/token")
    proc, _ = _gcp_apply(tmp_path, _gcp_env(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(key)))
    one_error_line(
        proc,
        f"Google refused the credentials from GOOGLE_APPLICATION_CREDENTIALS ({key})",
        "invalid_grant",
        secrets=("PRIVATE KEY",),
    )


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [(DEAD, "connection refused"), (UNRESOLVABLE, "host name does not resolve")],
    ids=["dead-port", "unresolvable"],
)
def test_gcp_an_endpoint_nothing_answers_at_fails_fast_naming_it(
    tmp_path: Path, stub: ThreadingHTTPServer, endpoint: str, why: str
) -> None:
    stub.answer = _google_token(grant=True)  # type: ignore[attr-defined]
    key = _service_account_key(tmp_path, f"{_url(stub)}/token")
    env = _gcp_env(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(key), VMPLANE_GCP_TEST_ENDPOINT=endpoint)
    proc, elapsed = _gcp_apply(tmp_path, env)
    one_error_line(proc, f"cannot reach the Google Cloud endpoint {endpoint}", why, secrets=("stub-access-token",))
    assert elapsed < FAST, f"{elapsed:.1f}s"
    assert "retrying" not in proc.stderr  # not transient: no retry at all
