"""Logs: the scope on every line, text and JSON formats, redaction, uvicorn's loggers, the CLI option."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from vmplane.observe import logs, redact, scope
from vmplane.pipeline.stepgraph import StepGraph, execute

from .support import EXAMPLE


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("json", "info", out)
    yield out
    logs.reset()


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_json_line_carries_time_level_and_the_scope(stream) -> None:
    with scope.scoped(job="job-1", org="acme", cloud="aws", phase="provision"), scope.scoped(step="stepX"):
        logs.get("vmplane.pipeline.runner").info("hello %s", "world")
    logs.get("elsewhere").warning("outside")
    inside, outside = lines(stream)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(inside["time"]))
    assert {k: inside[k] for k in ("level", "job", "step", "org", "cloud", "phase", "message", "logger")} == {
        "level": "info",
        "job": "job-1",
        "step": "stepX",
        "org": "acme",
        "cloud": "aws",
        "phase": "provision",
        "message": "hello world",
        "logger": "vmplane.pipeline.runner",
    }
    assert outside["job"] is None and outside["step"] is None and outside["logger"] == "vmplane.elsewhere"


def test_text_is_one_line_for_people_and_warning_is_the_default_level() -> None:
    out = io.StringIO()
    logs.configure("text", None, out)
    try:
        log = logs.get("vmplane.x")
        log.info("not shown")
        with scope.scoped(job="job-1", step="stepX"):
            log.warning("disk %d%%", 90)
    finally:
        logs.reset()
    assert re.fullmatch(r"\S+Z WARNING \[job-1 stepX\] disk 90%\n", out.getvalue())


def test_unknown_format_or_level_is_refused() -> None:
    with pytest.raises(ValueError, match="text or json"):
        logs.configure("xml")
    with pytest.raises(ValueError, match="log level"):
        logs.configure("text", "loud")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdefghijklmnop123", "abcdefghijklmnop123"),
        ("token vmp_" + "Ab3-_x" * 7, "vmp_Ab3"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtn"),
        ("key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE"),
        ('{"SessionToken": "FwoGZXIvYXdzEBYaDH"}', "FwoGZXIv"),
        ("gcp ya29.a0AfH6SMBx-token", "a0AfH6SMBx"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n-----END RSA PRIVATE KEY-----", "MIIEsecret"),
        ("password: hunter22", "hunter22"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str) -> None:
    out = redact.redact(text)
    assert secret not in out and redact.MASK in out


def test_known_values_are_redacted_in_messages_arguments_and_tracebacks(stream) -> None:
    redact.remember_environment({"MY_API_TOKEN": "opaque-value-1234", "HOME": "/root"})
    redact.remember(["runtime-secret-99", "abc"])  # too short to be told from words: kept
    log = logs.get("vmplane.x")
    log.info("value %s and runtime-secret-99, abc", "opaque-value-1234")
    try:
        raise RuntimeError("boom opaque-value-1234")
    except RuntimeError:
        log.exception("failed")
    text = stream.getvalue()
    assert "opaque-value-1234" not in text and "runtime-secret-99" not in text
    assert "abc" in text and "RuntimeError" in text
    assert redact.redact("/root") == "/root"  # HOME names no secret


def test_ordinary_lines_are_left_alone() -> None:
    for text in ("stepCreateNetwork: created vpc-0a1b2c3d", "secretsmanager call", "3 tokens"):
        assert redact.redact(text) == text


def test_sdk_sentences_and_credential_file_paths_survive_while_secrets_do_not() -> None:
    # Issue 23: google-auth's "DefaultCredentialsError: Your default credentials ..." lost "Your" to the
    # key=value net, and the key file's path (a credential-named variable's value) was masked as a secret.
    sentence = "DefaultCredentialsError: Your default credentials were not found. To set up ADC, see ..."
    assert redact.redact(sentence) == sentence
    assert (
        redact.redact("TokenRetrievalError: Error when retrieving token")
        == "TokenRetrievalError: Error when retrieving token"
    )
    assert redact.redact("client_secret: abcdefgh") == f"client_secret: {redact.MASK}"
    redact.remember_environment(
        {
            "GOOGLE_APPLICATION_CREDENTIALS": "/etc/keys/sa.json",
            "AWS_SHARED_CREDENTIALS_FILE": "/etc/aws/credentials",
            "GOOGLE_OAUTH_ACCESS_TOKEN": "opaque-oauth-value-77",
        }
    )
    out = redact.redact(
        "GOOGLE_APPLICATION_CREDENTIALS (/etc/keys/sa.json) and /etc/aws/credentials: opaque-oauth-value-77"
    )
    assert out == f"GOOGLE_APPLICATION_CREDENTIALS (/etc/keys/sa.json) and /etc/aws/credentials: {redact.MASK}"


def test_uvicorn_logs_go_through_the_same_formatter() -> None:
    out = io.StringIO()
    logs.configure("json", None, out)
    try:
        logging.getLogger("uvicorn.access").addHandler(logging.StreamHandler(io.StringIO()))  # as its config does
        logs.serving(out)  # serve/worker: INFO, and uvicorn's handlers replaced by ours
        logging.getLogger("uvicorn.access").info('127.0.0.1 - "GET /healthz HTTP/1.1" 200')
        logging.getLogger("uvicorn.error").debug("not at info")
        handlers = list(logging.getLogger("uvicorn.access").handlers)
    finally:
        logs.reset()
    (line,) = lines(out)
    assert line["logger"] == "uvicorn.access" and line["level"] == "info" and "/healthz" in str(line["message"])
    assert [h.get_name() for h in handlers] == ["vmplane-observe"]  # uvicorn's own one is gone


def test_the_scope_follows_a_job_into_its_step_threads() -> None:
    seen: dict[str, scope.Scope] = {}
    graph = StepGraph(["a", "b"], {"a": [], "b": ["a"]})
    with scope.scoped(job="job-7", phase="teardown"):
        execute(graph, lambda name, hooks: seen.setdefault(name, scope.current()))
    assert {n: (s.job, s.phase) for n, s in seen.items()} == {"a": ("job-7", "teardown"), "b": ("job-7", "teardown")}


def test_cli_logs_never_touch_json_stdout() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            *("-m", "vmplane", "--log-format", "json", "--log-level", "debug"),
            "validate",
            "-f",
            str(EXAMPLE),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # one JSON document, nothing else
    bad = subprocess.run(
        [sys.executable, "-m", "vmplane", "--log-format", "xml", "validate", "-f", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "text or json" in bad.stderr


def test_the_oldest_job_values_are_dropped_beyond_the_bound_but_credentials_stay(monkeypatch) -> None:
    monkeypatch.setattr(redact, "MAX_KNOWN", 3)
    redact.remember_environment({"SOME_SECRET": "pinned-credential-1"})
    redact.remember([f"job-value-{i:04d}" for i in range(5)])
    out = redact.redact("pinned-credential-1 job-value-0000 job-value-0004")
    assert out == f"{redact.MASK} job-value-0000 {redact.MASK}"
