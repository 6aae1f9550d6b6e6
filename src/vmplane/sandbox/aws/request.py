"""A WSGI request to moto, read back into the botocore input shape boto3 was given (an `AwsRequest`).

The service comes from the SigV4 credential scope (`.../<region>/<service>/aws4_request`, in the
`Authorization` header or a presigned URL's `X-Amz-Credential`), the operation per the model's protocol:
`ec2`/`query` from the form's `Action`, `json` from `X-Amz-Target`, `rest-json`/`rest-xml` by matching the
method and `requestUri` templates. Members are read where botocore's serializers put them, so the
result is what `serialize.py` was given. Anything this module cannot place answers None: the caller
passes such a request to moto unchanged.
"""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape

from vmplane.sandbox.aws import rest
from vmplane.sandbox.aws.rule import AwsRequest
from vmplane.sandbox.aws.shapes import scalar, service_model

__all__ = ["SERVICES", "Parsed", "parse", "preload", "scalar", "service_model"]

# The services vmplane drives (botocore names). Others pass through to moto unchecked.
SERVICES = ("ec2", "elbv2", "autoscaling", "iam", "sts", "acm", "ssm", "route53", "s3", "scheduler", "secretsmanager")

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([^/,\s]+)/([^/,\s]+)/aws4_request")
_MISSING: Any = object()


@dataclass(frozen=True)
class Parsed:
    request: AwsRequest
    protocol: str
    model: ServiceModel
    operation: OperationModel


def preload() -> None:
    """Load every checked service's model and routes (EC2's alone takes ~0.3-0.7 s), so the first request
    of each does not wait for it."""
    for name in SERVICES:
        if service_model(name).protocol.startswith("rest"):
            rest.routes(name)
    _by_signing_name()


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
            matched = rest.match(model, environ, query)
            if matched is None:
                return None
            op, labels = matched
            values = rest.values(model, op, labels, environ, query, body)
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
    if isinstance(shape, ListShape):
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
    if isinstance(shape, MapShape):
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
