"""A WSGI request to moto, read back into the botocore input shape boto3 was given (an `AwsRequest`).

The service comes from the SigV4 credential scope (`.../<region>/<service>/aws4_request`, in the
`Authorization` header or a presigned URL's `X-Amz-Credential`), the operation per the model's protocol:
`ec2`/`query` from the form's `Action`, `json` from `X-Amz-Target`, `rest-json`/`rest-xml` by matching the
method and `requestUri` templates. Members are read where botocore's serializers put them, so the
result is what `serialize.py` was given. Anything this module cannot place answers None: the caller
passes such a request to moto unchanged.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import email.utils
import functools
import json
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

import botocore.session
from botocore.model import OperationModel, ServiceModel, Shape, StructureShape

from vmplane.sandbox.aws.rule import AwsRequest

# The services vmplane drives (botocore names). Others pass through to moto unchecked.
SERVICES = ("ec2", "elbv2", "autoscaling", "iam", "sts", "acm", "ssm", "route53", "s3", "scheduler")

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([^/,\s]+)/([^/,\s]+)/aws4_request")
_MISSING: Any = object()
_lock = threading.Lock()


@dataclass(frozen=True)
class Parsed:
    request: AwsRequest
    protocol: str
    model: ServiceModel
    operation: OperationModel


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


def service_model(name: str) -> ServiceModel:
    with _lock:  # botocore's loader caches, but is not documented as thread-safe
        return _cached_model(name)


@functools.cache
def _cached_model(name: str) -> ServiceModel:
    return _session().get_service_model(name)


@functools.cache
def _by_signing_name() -> dict[str, list[str]]:
    """SigV4 signing name -> botocore names ("elasticloadbalancing" -> ["elbv2"])."""
    out: dict[str, list[str]] = {}
    for name in SERVICES:
        out.setdefault(service_model(name).signing_name or name, []).append(name)
    return out


def scope(environ: Mapping[str, Any], query: Mapping[str, list[str]]) -> tuple[str, str] | None:
    """(region, signing name) from the request's SigV4 credential scope, or None if unsigned."""
    found = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found:
        return found.group(1), found.group(2)
    cred = query.get("X-Amz-Credential", [""])[0].split("/")
    if len(cred) == 5 and cred[4] == "aws4_request":
        return cred[2], cred[3]
    return None


def parse(environ: Mapping[str, Any], body: bytes) -> Parsed | None:
    """The request as botocore's input shape, or None when it is not one of SERVICES' operations."""
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    found = scope(environ, query)
    if found is None:
        return None
    region, signing = found
    form: dict[str, str] | None = None
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
    for name in _by_signing_name().get(signing, []):
        model = service_model(name)
        if model.protocol in ("ec2", "query"):
            params = form if form is not None else {k: v[-1] for k, v in query.items()}
            if params.get("Version") != model.api_version or "Action" not in params:
                continue
            op = _operation(model, params["Action"])
            if op is None:
                return None
            values = _form_struct(op.input_shape, params, "", model.protocol == "ec2")
        elif model.protocol == "json":
            target = environ.get("HTTP_X_AMZ_TARGET", "")
            prefix, _, action = target.partition(".")
            if prefix != model.metadata.get("targetPrefix"):
                continue
            op = _operation(model, action)
            if op is None:
                return None
            values = json.loads(body or b"{}") if op.input_shape is not None else {}
            if not isinstance(values, dict):
                return None
        else:
            matched = _match_rest(model, environ, query)
            if matched is None:
                return None
            op, labels = matched
            values = _rest_values(model, op, labels, environ, query, body)
        return Parsed(AwsRequest(name, op.name, values, region=region), model.protocol, model, op)
    return None


def _operation(model: ServiceModel, action: str) -> OperationModel | None:
    return model.operation_model(action) if action in model.operation_names else None


# --- ec2 / query: flattened form members ---------------------------------------------------------


def _form_name(member: Shape, default: str, ec2: bool) -> str:
    """The wire name botocore's serializer gives a member (EC2Serializer / QuerySerializer)."""
    ser = member.serialization
    if ec2:
        if "queryName" in ser:
            return str(ser["queryName"])
        if "name" in ser:
            return str(ser["name"][0].upper() + ser["name"][1:])
        return default
    return str(ser.get("name", default))


def _has_prefix(form: Mapping[str, str], prefix: str) -> bool:
    dotted = prefix + "."
    return any(k == prefix or k.startswith(dotted) for k in form)


def _indices(form: Mapping[str, str], prefix: str) -> list[int]:
    dotted, out = prefix + ".", set()
    for k in form:
        if k.startswith(dotted):
            head = k[len(dotted) :].split(".", 1)[0]
            if head.isdigit():
                out.add(int(head))
    return sorted(out)


def _form_struct(shape: Shape | None, form: Mapping[str, str], prefix: str, ec2: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(shape, StructureShape):
        return out
    for name, member in shape.members.items():
        key = _form_name(member, name, ec2)
        value = _form_value(member, form, f"{prefix}.{key}" if prefix else key, ec2)
        if value is not _MISSING:
            out[name] = value
    return out


def _form_value(shape: Shape, form: Mapping[str, str], prefix: str, ec2: bool) -> Any:
    kind = shape.type_name
    if kind == "structure":
        return _form_struct(shape, form, prefix, ec2) if _has_prefix(form, prefix) else _MISSING
    if kind == "list":
        member: Shape = shape.member
        if ec2:
            base = prefix
        elif shape.serialization.get("flattened"):
            base = prefix
            if member.serialization.get("name"):
                base = ".".join([*prefix.split(".")[:-1], _form_name(member, "", ec2)]).lstrip(".")
        else:
            base = f"{prefix}.{member.serialization.get('name', 'member')}"
        if form.get(prefix) == "" and not _indices(form, base):
            return []  # the query protocol's empty list
        found = _indices(form, base)
        if not found:
            return _MISSING
        return [_form_value(member, form, f"{base}.{i}", ec2) for i in found]
    if kind == "map":
        base = prefix if shape.serialization.get("flattened") else f"{prefix}.entry"
        key_shape: Shape = shape.key
        value_shape: Shape = shape.value
        key_name, value_name = _form_name(key_shape, "key", False), _form_name(value_shape, "value", False)
        found = _indices(form, base)
        if not found:
            return _MISSING
        return {
            form.get(f"{base}.{i}.{key_name}", ""): _form_value(value_shape, form, f"{base}.{i}.{value_name}", ec2)
            for i in found
        }
    if prefix not in form:
        return _MISSING
    return scalar(shape, form[prefix])


def scalar(shape: Shape, text: str) -> Any:
    """A text value (form, header, query string, XML) as the Python type botocore was given; left as
    the text when it does not parse, so the model check reports the member's type."""
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind in ("float", "double"):
            return float(text)
        if kind == "boolean":
            return {"true": True, "false": False}.get(text.lower(), text)
        if kind == "timestamp":
            return _timestamp(text)
        if kind == "blob":
            return base64.b64decode(text, validate=True) if shape.serialization.get("location") is None else text
    except (ValueError, binascii.Error):
        return text
    return text


def _timestamp(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        pass
    try:
        return dt.datetime.fromtimestamp(float(text), dt.UTC)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return text


# --- rest-json / rest-xml: URI templates, headers, query string, body -----------------------------


@dataclass(frozen=True)
class _Route:
    method: str
    path: re.Pattern[str]
    labels: tuple[str, ...]
    literals: dict[str, str | None]  # query keys the template names ("?uploads", "?list-type=2")
    weight: int  # literal characters in the path: a longer literal is a more specific route
    operation: str


@functools.cache
def _routes(name: str) -> list[_Route]:
    model = service_model(name)
    routes = []
    for op_name in model.operation_names:
        http = model.operation_model(op_name).http
        path, _, qs = http["requestUri"].partition("?")
        labels: list[str] = []
        regex = "".join(_piece(p, labels) for p in re.split(r"(\{[^}]+\})", path))
        pieces = re.split(r"\{[^}]+\}", path)
        literals = {k: (v[0] if v else None) for k, v in _literal_query(qs).items()}
        weight = sum(len(p) for p in pieces)
        # botocore drops a trailing slash after a label that is empty; the routes accept both
        routes.append(
            _Route(http["method"], re.compile(regex.rstrip("/") + "/?$"), tuple(labels), literals, weight, op_name)
        )
    return routes


def _piece(piece: str, labels: list[str]) -> str:
    """One piece of a requestUri as a regex: a `{Label}` (a `{Key+}` is greedy) or literal text."""
    if not piece.startswith("{"):
        return re.escape(piece)
    name = piece[1:-1]
    labels.append(name.rstrip("+"))
    return "(.+)" if name.endswith("+") else "([^/]+)"


def _literal_query(qs: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in qs.split("&") if qs else []:
        key, eq, value = part.partition("=")
        out[key] = [value] if eq else []
    return out


def _match_rest(
    model: ServiceModel, environ: Mapping[str, Any], query: Mapping[str, list[str]]
) -> tuple[OperationModel, dict[str, str]] | None:
    path = environ.get("RAW_URI", environ.get("PATH_INFO", "/")).split("?", 1)[0] or "/"
    method = environ.get("REQUEST_METHOD", "GET")
    found: list[tuple[tuple[int, int, int], _Route, re.Match[str]]] = []
    for route in _routes(model.service_name):
        if route.method != method:
            continue
        m = route.path.match(path)
        if m is None:
            continue
        if any(k not in query or (v is not None and query[k][-1] != v) for k, v in route.literals.items()):
            continue
        # S3's PutObject and CopyObject share a template: the one whose required headers are sent wins
        sent = _required_sent(model.operation_model(route.operation), environ, query)
        found.append(((len(route.literals), int(sent), route.weight), route, m))
    if not found:
        return None
    _, route, m = max(found, key=lambda f: f[0])
    labels = {n: urllib.parse.unquote(v) for n, v in zip(route.labels, m.groups(), strict=True)}
    return model.operation_model(route.operation), labels


def _required_sent(op: OperationModel, environ: Mapping[str, Any], query: Mapping[str, list[str]]) -> bool:
    shape = op.input_shape
    for name in getattr(shape, "required_members", []):
        ser = shape.members[name].serialization
        wire = ser.get("name", name)
        if ser.get("location") == "header" and f"HTTP_{wire.upper().replace('-', '_')}" not in environ:
            return False
        if ser.get("location") == "querystring" and wire not in query:
            return False
    return True


def _rest_values(
    model: ServiceModel,
    op: OperationModel,
    labels: Mapping[str, str],
    environ: Mapping[str, Any],
    query: Mapping[str, list[str]],
    body: bytes,
) -> dict[str, Any]:
    shape = op.input_shape
    out: dict[str, Any] = {}
    if not isinstance(shape, StructureShape):
        return out
    body_members: dict[str, Shape] = {}
    for name, member in shape.members.items():
        ser = member.serialization
        where, wire = ser.get("location"), ser.get("name", name)
        if where == "uri":
            if wire in labels:
                out[name] = scalar(member, labels[wire])
        elif where == "querystring":
            if member.type_name == "map":
                out[name] = {k: v[-1] for k, v in query.items()}
            elif wire in query:
                vals = query[wire]
                out[name] = (
                    [scalar(member.member, v) for v in vals] if member.type_name == "list" else scalar(member, vals[-1])
                )
        elif where == "headers":  # a map of prefixed headers (S3's x-amz-meta-*)
            pre = "HTTP_" + wire.upper().replace("-", "_")
            found = {k[len(pre) :].lower().replace("_", "-"): str(v) for k, v in environ.items() if k.startswith(pre)}
            if found:
                out[name] = found
        elif where == "header":
            key = wire.upper().replace("-", "_")
            # werkzeug puts these two without the HTTP_ prefix, and as "" when the client sent none
            raw = environ.get(key) if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else environ.get(f"HTTP_{key}")
            if raw not in (None, ""):
                out[name] = scalar(member, str(raw))
        elif where is None:
            body_members[name] = member
    payload = shape.serialization.get("payload")
    if payload:
        member = shape.members[payload]
        if member.type_name == "structure" and body:
            out[payload] = _body(model, member, body)
        elif body:
            out[payload] = body  # a blob or string payload: opaque bytes
    elif body_members and body:
        read = _body(model, shape, body)
        out.update({k: v for k, v in read.items() if k in body_members})
    return out


def _body(model: ServiceModel, shape: Shape, body: bytes) -> dict[str, Any]:
    if model.protocol == "rest-json":
        value = json.loads(body)
        return value if isinstance(value, dict) else {}
    root = ElementTree.fromstring(body)
    value = _xml_value(shape, root)
    return value if isinstance(value, dict) else {}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_value(shape: Shape, el: ElementTree.Element) -> Any:
    kind = shape.type_name
    if kind == "structure":
        out: dict[str, Any] = {}
        for name, member in shape.members.items():
            wire = member.serialization.get("name", name)
            if member.serialization.get("xmlAttribute"):
                continue  # attributes (S3's xsi:type) are not checked
            if member.type_name in ("list", "map") and member.serialization.get("flattened"):
                children = [c for c in el if _local(c.tag) == wire]
                if children:
                    out[name] = _xml_flat(member, children)
                continue
            child = next((c for c in el if _local(c.tag) == wire), None)
            if child is not None:
                out[name] = _xml_value(member, child)
        return out
    if kind == "list":
        member = shape.member
        return [_xml_value(member, c) for c in el]
    if kind == "map":
        return _xml_flat(shape, list(el))
    return scalar(shape, el.text or "")


def _xml_flat(shape: Shape, children: list[ElementTree.Element]) -> Any:
    if shape.type_name == "list":
        return [_xml_value(shape.member, c) for c in children]
    key_name = shape.key.serialization.get("name", "key")
    value_name = shape.value.serialization.get("name", "value")
    out: dict[str, Any] = {}
    for entry in children:
        k = next((c.text or "" for c in entry if _local(c.tag) == key_name), "")
        v = next((c for c in entry if _local(c.tag) == value_name), None)
        out[k] = _xml_value(shape.value, v) if v is not None else None
    return out
