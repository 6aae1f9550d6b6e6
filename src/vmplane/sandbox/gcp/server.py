"""The embedded Google Cloud sandbox's HTTP server (stdlib ThreadingHTTPServer on 127.0.0.1).

A request is routed through the discovery documents, its query and body checked against them, handed
to the method's handler, and the answer checked against the method's response schema before it is
written. Anything not Google's lives under `/_sandbox/` (control.py). Cloud Storage's uploads carry
media (not JSON) and its downloads answer with the object's bytes (storage_media.Raw); a GET no
discovery route serves is tried as the XML API's read of `/{bucket}/{object}`.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from vmplane.sandbox.gcp import (  # noqa: F401 - importing a family registers its handlers
    compute_autoscalers,
    compute_catalogue,
    compute_groups,
    compute_instances,
    compute_lb,
    compute_network,
    compute_policies,
    compute_region_groups,
    control,
    dns,
    iam,
    paging,
    rules,
    secretmanager,
    secretmanager_versions,
    storage,
    storage_media,
)
from vmplane.sandbox.gcp import discovery as disc
from vmplane.sandbox.gcp.compute import HANDLERS, Call
from vmplane.sandbox.gcp.errors import ApiError
from vmplane.sandbox.gcp.schema import check_request, check_response
from vmplane.sandbox.gcp.store import State

if TYPE_CHECKING:
    from vmplane.sandbox.faults_gcp import GcpFaults

log = logging.getLogger(__name__)


class GcpSandbox:
    """The server and its state; `start()` serves from a daemon thread until `stop()`."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.state = State()
        self.discovery = disc.get()
        rules.load()
        self.faults: GcpFaults | None = None  # a fault profile's hook (sandbox/faults_gcp.py), if started with one
        self.httpd = ThreadingHTTPServer((host, port), _handler_class(self))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="gcp-sandbox", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve(
        self, http: str, target: str, body: Any, raw: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """One request: (HTTP status, JSON answer or storage_media.Raw). `raw` is an upload's body."""
        url = urllib.parse.urlsplit(target)
        raw_query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        with self.state.lock:
            try:
                if url.path == "/_sandbox/faults":
                    return 200, self.faults.faults.report() if self.faults else {"profile": None, "tally": {}}
                if url.path.startswith("/_sandbox/"):
                    return 200, control.handle(self, http, url.path, raw_query, body, headers or {})
                return 200, self._google(http, url.path, raw_query, body, raw, headers or {})
            except ApiError as e:
                return e.code, e.body()
            except Exception:  # a sandbox bug must still answer in Google's shape, never hang a client
                log.error("sandbox failure on %s %s\n%s", http, target, traceback.format_exc())
                return 500, ApiError(500, "backendError", "sandbox internal error; see the sandbox log").body()

    def _google(
        self, http: str, path: str, raw_query: dict[str, list[str]], body: Any, raw: bytes, headers: dict[str, str]
    ) -> Any:
        if self.faults is not None:
            self.faults.before(http, path, headers)
        try:
            method, params = self.discovery.route(http, path)
        except ApiError as e:
            if e.code == 404 and http == "GET" and storage_media.xml_bucket(self.state, path):
                return storage_media.xml_read(self.state, path, headers)
            raise
        query = self.discovery.query(method, raw_query)
        api = self.discovery.apis[method.api]
        media, media_type = None, ""
        if method.upload:
            body, media, media_type = storage_media.split_upload(
                query.get("uploadType"), headers.get("content-type", ""), raw
            )
        if method.request:
            root = "resource" if method.api == "compute" else method.request[0].lower() + method.request[1:]
            check_request(api.schemas, method.request, body if body is not None else {}, method.id, root)
        fn = HANDLERS.get(method.id)
        if fn is None:
            raise ApiError(501, "notImplemented", f"the sandbox does not emulate {method.id}", "UNIMPLEMENTED")
        call = Call(self.state, method, params, query, body, api.schemas, media, media_type, headers)
        rules.check(call)  # the fidelity catalogue (rules/): what Google refuses beyond the documents
        if method.api == "compute" and method.response == "Operation" and query.get("requestId"):
            seen = call.project.request_ids.get(query["requestId"])
            if seen is not None:  # same requestId: the same operation, nothing done twice
                return call.project.operations[seen]
        result = fn(call)
        if paging.pages(method) and isinstance(result, dict):
            result = paging.paginate(self.state, query, result)
        if self.faults is not None:
            self.faults.after(self.state, method.id, result)
        if method.response and not isinstance(result, storage_media.Raw):
            check_response(api.schemas, method.response, result)
        return result


def _handler_class(sandbox: GcpSandbox) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                raw = self._chunked()  # Go's storage client streams an upload's multipart body
            else:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                media = self.path.startswith("/upload/")
                body = json.loads(raw) if raw.strip() and not media else None
            except ValueError as e:
                status, answer = 400, ApiError(400, "parseError", f"Invalid JSON payload received. {e}").body()
            else:
                status, answer = sandbox.serve(self.command, self.path, body, raw if media else b"", headers)
            if isinstance(answer, storage_media.Raw):
                status, data, sent = answer.status, answer.body, answer.headers
            else:
                data, sent = json.dumps(answer).encode(), {"Content-Type": "application/json; charset=UTF-8"}
            self.send_response(status)
            for name, value in sent.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _chunked(self) -> bytes:
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers, up to the blank line
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()  # the CRLF after each chunk

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
