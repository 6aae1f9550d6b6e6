"""The strict layer as WSGI middleware, with no server: the catalogue hook (rules of the operation in
order, the first fault wins, a rule's own exception never answered as AWS's), the tally, the body handed
on to moto intact, and wrappers around it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import Any

from tests.sandbox.test_aws_strict_parse import _environ

from vmplane.sandbox.aws.app import STATUS_PATH, StrictLayer, build_app
from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Rule


class Moto:
    """Stands in for moto: records what it was given, answers 200."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.bodies.append(environ["wsgi.input"].read())
        start_response("200 OK", [])
        return [b"moto"]


def _rule(rid: str, answer: AwsFault | Exception | None, seen: list[str]) -> Rule:
    def check(req: AwsRequest) -> AwsFault | None:
        seen.append(rid)
        if isinstance(answer, Exception) and not isinstance(answer, AwsFault):
            raise answer
        return answer

    return Rule(rid, "ec2", ("CreateVpc",), "test", "https://example.invalid", check, "X")


def _call(app: Any, environ: dict[str, Any]) -> tuple[str, bytes]:
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h: status.append(s)))
    return status[0], body


def test_rules_run_in_order_and_the_first_fault_wins() -> None:
    seen: list[str] = []
    rules = [
        _rule("ec2.broken", RuntimeError("a rule's own bug"), seen),
        _rule("ec2.passes", None, seen),
        _rule("ec2.first", AwsFault("DependencyViolation", "first"), seen),
        _rule("ec2.second", AwsFault("Other", "second"), seen),
    ]
    moto = Moto()
    layer = StrictLayer(moto, rules)
    status, body = _call(layer, _environ("ec2", "CreateVpc", {"CidrBlock": "10.0.0.0/16"})[0])
    assert (status, b"<Code>DependencyViolation</Code>" in body, seen, moto.bodies) == (
        "400 Bad Request",
        True,
        ["ec2.broken", "ec2.passes", "ec2.first"],
        [],
    )
    assert dict(layer.refusals) == {"ec2.first": 1}


def test_the_model_answers_before_any_rule() -> None:
    seen: list[str] = []
    layer = StrictLayer(Moto(), [_rule("ec2.first", AwsFault("DependencyViolation", "first"), seen)])
    environ, _ = _environ("ec2", "CreateVpc", {"CidrBlock": "10.0.0.0/16", "InstanceTenancy": "nope"})
    status, body = _call(layer, environ)
    assert (status, b"<Code>InvalidParameterValue</Code>" in body, seen) == ("400 Bad Request", True, [])
    assert dict(layer.refusals) == {"ec2.model.enum": 1}


def test_moto_gets_the_body_the_client_sent() -> None:
    """By Content-Length, and to the end where werkzeug marks the input terminated (chunked)."""
    moto = Moto()
    layer = StrictLayer(moto)
    environ, body = _environ("ec2", "CreateVpc", {"CidrBlock": "10.0.0.0/16"})
    assert _call(layer, environ) == ("200 OK", b"moto")
    chunked, _ = _environ("ec2", "CreateVpc", {"CidrBlock": "10.0.0.0/16"})
    chunked |= {"wsgi.input_terminated": True, "CONTENT_LENGTH": ""}
    assert _call(layer, chunked) == ("200 OK", b"moto")
    assert (moto.bodies, dict(layer.checked)) == ([body, body], {"ec2": 2})


def test_unparsable_requests_pass_and_are_counted() -> None:
    moto = Moto()
    layer = StrictLayer(moto)
    environ, _ = _environ("acm", "ListCertificates", {})
    environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(b"{not json"), "9"
    assert _call(layer, environ) == ("200 OK", b"moto")
    assert (moto.bodies, [k.split(":")[0] for k in layer.passed]) == ([b"{not json"], ["unparsed POST JSONDecodeError"])


def test_the_status_path_answers_the_tally() -> None:
    layer = StrictLayer(Moto(), lenient=True)
    status, body = _call(layer, {"PATH_INFO": STATUS_PATH, "REQUEST_METHOD": "GET"})
    assert (status, json.loads(body)["lenient"], json.loads(body)["refusals"]) == ("200 OK", True, {})


def test_wrappers_wrap_from_outside_in_order() -> None:
    order: list[str] = []

    def wrapper(name: str) -> Any:
        def wrap(app: Any) -> Any:
            def call(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
                order.append(name)
                return app(environ, start_response)  # type: ignore[no-any-return]

            return call

        return wrap

    app = build_app([wrapper("inner"), wrapper("outer")], lenient=True)
    status, _ = _call(app, {"PATH_INFO": STATUS_PATH, "REQUEST_METHOD": "GET"})
    assert (status, order) == ("200 OK", ["outer", "inner"])
