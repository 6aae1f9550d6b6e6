"""The AWS sandbox's WSGI application: moto's server behind a strict layer.

Each request is parsed into an `AwsRequest` (request.py), checked against botocore's model (model.py),
then run through the catalogue (`vmplane.sandbox.aws.rules.RULES`, when that package is present): the
first fault wins and is answered in the service's error shape (errors.py); otherwise moto answers.
A request the layer cannot place (another service, moto's own /moto-api/, an unsigned call) goes to
moto unchanged: the layer may only refuse what it understands.

`VMPLANE_SANDBOX_LENIENT=1` turns the layer off (moto alone, as before issue 25), to compare in tests.
`GET /_vmplane/strict` answers the process's tally of refusals by rule id.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vmplane.sandbox.aws import errors, model, patterns, request
from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Rule

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Wrapper = Callable[[WsgiApp], WsgiApp]

STATUS_PATH = "/_vmplane/strict"
log = logging.getLogger("vmplane.sandbox.aws")


def _catalogue() -> Sequence[Rule]:
    """The catalogue's rules (aws-rules' package), or none while it is absent."""
    try:
        rules = importlib.import_module("vmplane.sandbox.aws.rules")
    except ModuleNotFoundError as e:
        if e.name != "vmplane.sandbox.aws.rules":
            raise  # a catalogue that fails to import is a bug to see, not a catalogue to skip
        return ()
    return tuple(rules.RULES)


class StrictLayer:
    def __init__(self, app: WsgiApp, rules: Sequence[Rule] = (), lenient: bool = False) -> None:
        self.app = app
        self.lenient = lenient
        self.rules: dict[tuple[str, str], list[Rule]] = {}
        for rule in rules:
            for op in rule.operations:
                self.rules.setdefault((rule.service, op), []).append(rule)
        self.refusals: Counter[str] = Counter()
        self.passed: Counter[str] = Counter()  # requests not understood, by reason (logged once each)
        self.checked: Counter[str] = Counter()  # requests parsed and checked, by service
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == STATUS_PATH:
            return self._status(start_response)
        if self.lenient or path.startswith("/moto-api"):
            return self.app(environ, start_response)
        body = _buffer(environ)
        try:
            parsed = request.parse(environ, body)
        except Exception as e:
            self._pass(f"unparsed {environ.get('REQUEST_METHOD')} {type(e).__name__}: {e}")
            return self.app(environ, start_response)
        if parsed is None:
            self._pass("not a checked service's operation")
            return self.app(environ, start_response)
        fault, rule_id = self.refusal(parsed)
        with self._lock:
            self.checked[parsed.request.service] += 1
        if fault is None:
            return self.app(environ, start_response)
        with self._lock:
            self.refusals[rule_id] += 1
        log.info(
            "refused %s.%s (%s): %s %s",
            parsed.request.service,
            parsed.request.operation,
            rule_id,
            fault.code,
            fault.message,
        )
        status, headers, payload = errors.render(fault, parsed.request.service, parsed.protocol)
        headers.append(("Content-Length", str(len(payload))))
        start_response(f"{status} {_REASONS.get(status, 'Error')}", headers)
        return [payload]

    def refusal(self, parsed: request.Parsed) -> tuple[AwsFault | None, str]:
        """The first fault for the request (the model's, then the catalogue's in order) and its id."""
        req = parsed.request
        shape = parsed.operation.input_shape
        violations = model.check(shape, req.params)
        if violations:
            payload = shape.serialization.get("payload") if shape is not None else None
            return errors.validation_fault(
                req.service, violations, payload
            ), f"{req.service}.model.{violations[0].kind}"
        for rule in self.rules.get((req.service, req.operation), ()):
            try:
                fault = rule.check(req)
            except Exception:  # a rule's own bug is logged, never answered as AWS's
                log.exception("rule %s failed on %s", rule.id, req.operation)
                continue
            if fault is not None:
                return fault, rule.id
        return None, ""

    def _pass(self, reason: str) -> None:
        with self._lock:
            first = reason not in self.passed
            self.passed[reason] += 1
        if first:
            log.info("strict layer passes to moto unchecked: %s", reason)

    def _status(self, start_response: StartResponse) -> list[bytes]:
        with self._lock:
            data = {
                "lenient": self.lenient,
                "refusals": dict(self.refusals),
                "checked": dict(self.checked),
                "passed": dict(self.passed),
                "rules": sum(len(v) for v in self.rules.values()),
                "patterns_skipped": patterns.skipped(),
            }
        payload = json.dumps(data).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]


_REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 412: "Precondition Failed"}


def _buffer(environ: dict[str, Any]) -> bytes:
    """Read the body once and put it back, so moto reads the same bytes."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    if environ.get("wsgi.input_terminated"):
        body = stream.read()
    else:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = stream.read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return bytes(body)


def lenient_from_env() -> bool:
    return os.environ.get("VMPLANE_SANDBOX_LENIENT") == "1"


def build_app(wrappers: Sequence[Wrapper] = (), lenient: bool | None = None) -> WsgiApp:
    """moto's dispatcher behind the strict layer, then each wrapper around the result in order (the
    last one sees a request first: a fault profile wraps from outside, as AWS throttles before it validates)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    moto: WsgiApp = DomainDispatcherApplication(create_backend_app)
    strict = StrictLayer(moto, _catalogue(), lenient_from_env() if lenient is None else lenient)
    if not strict.lenient:
        threading.Thread(target=request.preload, name="aws-models", daemon=True).start()
    app: WsgiApp = strict
    for wrap in wrappers:
        app = wrap(app)
    return app


def serve(app: WsgiApp, port: int = 0) -> Any:
    """`app` on 127.0.0.1:`port` (0: a free one) with moto's request handler, from a daemon thread; the
    werkzeug server is returned (`server_port`, `shutdown()`)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, name="aws-sandbox", daemon=True).start()
    return server


def check(req: AwsRequest) -> list[model.Violation]:
    """The model's violations for an `AwsRequest` built in code (tests and the catalogue's examples)."""
    op = request.service_model(req.service).operation_model(req.operation)
    return model.check(op.input_shape, req.params)
