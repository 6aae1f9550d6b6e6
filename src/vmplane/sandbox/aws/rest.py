"""rest-json / rest-xml requests (Route 53, S3, EventBridge Scheduler): the operation found by method and
`requestUri` template (`{Key+}` greedy), members read from the path labels, headers, query string and the
JSON or XML body where botocore's serializers put them."""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape

from vmplane.sandbox.aws.shapes import scalar, service_model


@dataclass(frozen=True)
class _Route:
    method: str
    path: re.Pattern[str]
    labels: tuple[str, ...]
    literals: dict[str, str | None]  # query keys the template names ("?uploads", "?list-type=2")
    weight: int  # literal characters in the path: a longer literal is a more specific route
    operation: str


@functools.cache
def routes(name: str) -> list[_Route]:
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


def match(
    model: ServiceModel, environ: Mapping[str, Any], query: Mapping[str, list[str]]
) -> tuple[OperationModel, dict[str, str]] | None:
    path = environ.get("RAW_URI", environ.get("PATH_INFO", "/")).split("?", 1)[0] or "/"
    method = environ.get("REQUEST_METHOD", "GET")
    found: list[tuple[tuple[int, int, int], _Route, re.Match[str]]] = []
    for route in routes(model.service_name):
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
    if not isinstance(shape, StructureShape):  # no input at all: nothing is required
        return True
    for name in shape.required_members:
        ser = shape.members[name].serialization
        wire = ser.get("name", name)
        if ser.get("location") == "header" and f"HTTP_{wire.upper().replace('-', '_')}" not in environ:
            return False
        if ser.get("location") == "querystring" and wire not in query:
            return False
    return True


def values(
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
                    [scalar(member.member, v) for v in vals]
                    if isinstance(member, ListShape)
                    else scalar(member, vals[-1])
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
    if isinstance(shape, StructureShape):
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
    if isinstance(shape, ListShape):
        return [_xml_value(shape.member, c) for c in el]
    if isinstance(shape, MapShape):
        return _xml_flat(shape, list(el))
    return scalar(shape, el.text or "")


def _xml_flat(shape: Shape, children: list[ElementTree.Element]) -> Any:
    if isinstance(shape, ListShape):
        return [_xml_value(shape.member, c) for c in children]
    if not isinstance(shape, MapShape):  # only lists and maps are flattened
        return None
    key_name = shape.key.serialization.get("name", "key")
    value_name = shape.value.serialization.get("name", "value")
    out: dict[str, Any] = {}
    for entry in children:
        k = next((c.text or "" for c in entry if _local(c.tag) == key_name), "")
        v = next((c for c in entry if _local(c.tag) == value_name), None)
        out[k] = _xml_value(shape.value, v) if v is not None else None
    return out
