"""What the VM-side secret fetcher talks to, on this machine: moto's Secrets Manager and SSM (in-process
ThreadedMotoServer), a fake IMDSv2 and a fake GCP metadata server + Secret Manager v1 `:access`.

moto checks no signature and runs no command on a VM: the fetcher runs here as a subprocess against
these, and its SigV4 is compared with botocore's in test_guest_secrets.py."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from vmplane.bootstrap import guest_secrets_main

ROLE = "vm-role"
CREDS = {"AccessKeyId": "ASIAFAKEKEY", "SecretAccessKey": "fake-secret-key", "Token": "fake-session-token"}
# The oldest python3 the fetcher supports, where this machine has it; else the tests' own.
PYTHON = next((p for p in (Path.home() / ".pyenv/versions").glob("3.8*/bin/python3")), Path(sys.executable))


@dataclass
class Served:
    url: str
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # GCP: (project, secret, version) -> payload; "latest" resolves to the highest version.
    secrets: dict[tuple[str, str], dict[int, bytes]] = field(default_factory=dict)
    fail_next: list[int] = field(default_factory=list)  # statuses to answer the next requests with


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    served: Served

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes | str | dict[str, Any], ctype: str = "application/json") -> None:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        data = data.encode() if isinstance(data, str) else data
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.served.requests.append((self.command, self.path, dict(self.headers.items())))
        if self.served.fail_next:
            self._send(self.served.fail_next.pop(0), {"error": {"status": "UNAVAILABLE"}})
            return
        self.answer()

    def answer(self) -> None:
        raise NotImplementedError

    do_GET = do_PUT = _handle


class _Imds(_Handler):
    def answer(self) -> None:
        base = "/latest/meta-data/iam/security-credentials/"
        if self.command == "PUT" and self.path == "/latest/api/token":
            if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._send(400, "missing ttl", "text/plain")
                return
            self._send(200, "imds-token", "text/plain")
        elif self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
            self._send(401, "IMDSv2 token required", "text/plain")
        elif self.path == base:
            self._send(200, ROLE, "text/plain")
        elif self.path == base + ROLE:
            self._send(200, {"Code": "Success", "Type": "AWS-HMAC", **CREDS})
        else:
            self._send(404, "not found", "text/plain")


class _Gcp(_Handler):
    def answer(self) -> None:
        if self.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                self._send(403, "Metadata-Flavor: Google required", "text/plain")
                return
            self._send(200, {"access_token": "ya29.fake", "expires_in": 3599, "token_type": "Bearer"})
            return
        if self.headers.get("Authorization") != "Bearer ya29.fake":
            self._send(401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}})
            return
        parts = self.path.removeprefix("/v1/projects/").split("/")
        if len(parts) != 5 or parts[1] != "secrets" or parts[3] != "versions" or not parts[4].endswith(":access"):
            self._send(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
            return
        versions = self.served.secrets.get((parts[0], parts[2]), {})
        want = parts[4].removesuffix(":access")
        number = max(versions, default=0) if want == "latest" else int(want)
        if number not in versions:
            self._send(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
            return
        data = versions[number]
        name = f"projects/{parts[0]}/secrets/{parts[2]}/versions/{number}"
        payload = {"data": base64.b64encode(data).decode(), "dataCrc32c": str(guest_secrets_main.crc32c(data))}
        self._send(200, {"name": name, "payload": payload})


def _served(handler: type[_Handler]) -> Iterator[Served]:
    served = Served("")
    cls = type(handler.__name__, (handler,), {"served": served})
    server, served.url = _serve(cls)
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def serve_imds() -> Iterator[Served]:
    yield from _served(_Imds)


def serve_gcp() -> Iterator[Served]:
    yield from _served(_Gcp)


def serve_moto() -> Iterator[str]:
    from moto.server import ThreadedMotoServer  # imported here: the other bootstrap tests need no moto

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def aws_client(service: str, url: str) -> Any:
    import boto3

    return boto3.client(
        service, region_name="us-east-1", endpoint_url=url, aws_access_key_id="x", aws_secret_access_key="x"
    )


def aws_source(moto_url: str, imds_url: str) -> dict[str, Any]:
    return {
        "cloud": "aws",
        "region": "us-east-1",
        "endpoints": {"imds": imds_url, "secretsmanager": moto_url, "ssm": moto_url},
    }


def run_fetcher(plan: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The fetcher as the VM runs it: its own file, a fresh interpreter, a plan file."""
    plan_file = tmp_path / "secrets.json"
    plan_file.write_text(json.dumps(plan))
    script = Path(guest_secrets_main.__file__)
    return subprocess.run(
        [str(PYTHON), str(script), str(plan_file)], capture_output=True, text=True, check=False, timeout=120
    )
