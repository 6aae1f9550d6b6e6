"""Checks a JSON value against a discovery schema, recursively, with Google's wording.

Used on every request body (`request.$ref`) and on every response the sandbox writes (`response.$ref`):
a response that breaks the schema is a sandbox bug and is answered 500 naming the field (gcplocal's
Operation `id` of 8 hex characters, not a uint64 string, is what this catches).
"""

from __future__ import annotations

import re
from typing import Any

from vmplane.sandbox.gcp.errors import ApiError, bad_request, invalid, sandbox_bug

_INT_RANGE = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
_DIGITS = re.compile(r"-?\d+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")


class SchemaError(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


def check_request(schemas: dict[str, Any], ref: str, body: Any, method_id: str, root: str = "resource") -> None:
    try:
        _check(schemas, {"$ref": ref}, body, root, method_id, strict=False)
    except SchemaError as e:
        raise invalid(str(e)) from None


def check_response(schemas: dict[str, Any], ref: str, body: Any) -> None:
    try:
        _check(schemas, {"$ref": ref}, body, "response", None, strict=True)
    except SchemaError as e:
        raise sandbox_bug(f"the response broke the {ref} schema at '{e.where}': {e}") from None


def _check(
    schemas: dict[str, Any], spec: dict[str, Any], value: Any, where: str, method: str | None, strict: bool
) -> None:
    if "$ref" in spec:
        spec = schemas[spec["$ref"]]
    kind = spec.get("type", "any")
    if kind == "any" or (value is None and not strict):  # a request's null is "unset" (a patch's removal)
        return
    if kind == "object":
        if not isinstance(value, dict):
            raise SchemaError(where, f"Invalid value at '{where}', expected an object, got {_show(value)}")
        props: dict[str, Any] = spec.get("properties", {})
        extra = spec.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra)
            if sub is None:
                raise SchemaError(
                    where, f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': Cannot find field."
                )
            path = f"{where}.{key}" if key in props else f"{where}[{key!r}]"
            _check(schemas, sub, item, path, method, strict)
        if method is not None:
            for key, sub in props.items():
                if method in sub.get("annotations", {}).get("required", ()) and key not in value:
                    raise SchemaError(f"{where}.{key}", f"Required field '{where}.{key}' not specified")
        return
    if kind == "array":
        if not isinstance(value, list):
            raise SchemaError(where, f"Invalid value at '{where}', expected a list, got {_show(value)}")
        for i, item in enumerate(value):
            _check(schemas, spec.get("items", {}), item, f"{where}[{i}]", method, strict)
        return
    _scalar(spec, kind, value, where, strict)


def _scalar(spec: dict[str, Any], kind: str, value: Any, where: str, strict: bool) -> None:
    fmt = spec.get("format", "")
    if kind == "boolean":
        if not isinstance(value, bool):
            raise SchemaError(where, f"Invalid value at '{where}' (TYPE_BOOL), {_show(value)}")
    elif kind in ("integer", "number") or fmt in ("int64", "uint64"):
        _number(kind, fmt, value, where, strict)
    elif kind == "string":
        if not isinstance(value, str):
            raise SchemaError(where, f"Invalid value at '{where}' (TYPE_STRING), {_show(value)}")
        if "enum" in spec and value not in spec["enum"]:
            raise SchemaError(
                where, f"Invalid value for field '{where}': '{value}'. Value must be one of {spec['enum']}"
            )
        if fmt == "byte" and not _BASE64.fullmatch(value):
            raise SchemaError(
                where, f"Invalid value at '{where}' (TYPE_BYTES), Base64 decoding failed for {_show(value)}"
            )


def _number(kind: str, fmt: str, value: Any, where: str, strict: bool) -> None:
    label = f"TYPE_{(fmt or kind).upper()}"
    if isinstance(value, bool):
        raise SchemaError(where, f"Invalid value at '{where}' ({label}), {_show(value)}")
    if kind == "number":
        if not isinstance(value, int | float):
            raise SchemaError(where, f"Invalid value at '{where}' ({label}), {_show(value)}")
        return
    # proto3 JSON: 64-bit integers are strings of digits (a number is accepted on input, as Google does);
    # 32-bit ones are numbers (a string of digits is accepted on input too).
    if isinstance(value, str) and _DIGITS.fullmatch(value) and not (strict and fmt not in ("int64", "uint64")):
        number = int(value)
    elif isinstance(value, int) and not (strict and fmt in ("int64", "uint64")):
        number = value
    else:
        raise SchemaError(where, f"Invalid value at '{where}' ({label}), {_show(value)}")
    low, high = _INT_RANGE.get(fmt, _INT_RANGE["int64"])
    if not low <= number <= high:
        raise SchemaError(where, f"Invalid value at '{where}' ({label}), {_show(value)}: out of range")


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def require_body(body: Any, root: str = "resource") -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request(f"Required field '{root}' not specified")
    return body


__all__ = ["ApiError", "SchemaError", "check_request", "check_response", "require_body"]
