"""The request's parameters checked against botocore's input shape, as AWS's front end checks them:
required members, types, enums, patterns, string lengths, list and map sizes, number ranges.

Each violation keeps its member path twice: the model's member names (for AWS's Coral-style message,
`tags.3.member.value`) and the wire names (EC2 names the parameter as sent: `TagSpecification.1.Tag.3.Value`).
Indices are 1-based, as on the wire.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StringShape, StructureShape

from vmplane.sandbox.aws.patterns import compiled

# What botocore calls a member's kind -> the Python types the parsed request may carry for it.
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "boolean": (bool,),
    "timestamp": (dt.datetime, int, float),
    "blob": (bytes, str),
    "list": (list,),
    "map": (dict,),
    "structure": (dict,),
}


@dataclass(frozen=True)
class Violation:
    kind: str  # required | type | enum | pattern | length | range
    names: tuple[str | int, ...]  # model member names and 1-based indices
    wire: tuple[str | int, ...]  # the same path in the EC2 wire names
    value: Any
    constraint: str  # AWS's wording: "Member must have length less than or equal to 256"

    @property
    def coral_path(self) -> str:
        """AWS's path in validation messages: `tagSpecifications.1.member.tags.3.member.value`."""
        parts: list[str] = []
        for p in self.names:
            parts.append(f"{p}.member" if isinstance(p, int) else p[:1].lower() + p[1:])
        return ".".join(parts)

    @property
    def wire_path(self) -> str:
        return ".".join(str(p) for p in self.wire)


def check(shape: Shape | None, params: Mapping[str, Any]) -> list[Violation]:
    """Every violation of the input shape, in member order."""
    out: list[Violation] = []
    if shape is not None:
        _check(shape, dict(params), (), (), out)
    return out


def _ec2_name(member: Shape, default: str) -> str:
    ser = member.serialization
    if "queryName" in ser:
        return str(ser["queryName"])
    if "name" in ser:
        return str(ser["name"][0].upper() + ser["name"][1:])
    return default


def _check(
    shape: Shape, value: Any, names: tuple[str | int, ...], wire: tuple[str | int, ...], out: list[Violation]
) -> None:
    kind = shape.type_name
    allowed = _TYPES.get(kind)
    wrong = allowed is not None and (not isinstance(value, allowed) or (kind != "boolean" and isinstance(value, bool)))
    if wrong and not (kind == "timestamp" and isinstance(value, str)):  # ISO text: some protocols send it so
        out.append(Violation("type", names, wire, value, f"Member must be of type {kind}"))
        return
    meta = shape.metadata
    # isinstance, not `kind`: botocore builds one Shape subclass per type name, and mypy narrows on it.
    if isinstance(shape, StructureShape):
        members: dict[str, Shape] = shape.members
        for name in getattr(shape, "required_members", []):
            if value.get(name) is None and name in members:
                sub_wire = (*wire, _ec2_name(members[name], name))
                out.append(Violation("required", (*names, name), sub_wire, None, "Member must not be null"))
        for name, sub in value.items():
            if name in members and sub is not None:
                member = members[name]
                _check(member, sub, (*names, name), (*wire, _ec2_name(member, name)), out)
        return
    if isinstance(shape, ListShape):
        _bounds(meta, len(value), names, wire, value, "length", out)
        for i, item in enumerate(value, 1):
            if item is not None:
                _check(shape.member, item, (*names, i), (*wire, i), out)
        return
    if isinstance(shape, MapShape):
        _bounds(meta, len(value), names, wire, value, "length", out)
        key: Shape = shape.key
        val: Shape = shape.value
        for k, v in value.items():
            _check(key, k, (*names, k), (*wire, k), out)
            if v is not None:
                _check(val, v, (*names, k), (*wire, k), out)
        return
    if isinstance(shape, StringShape):
        _bounds(meta, len(value), names, wire, value, "length", out)
        enum = shape.enum
        if enum and value not in enum:
            out.append(
                Violation("enum", names, wire, value, f"Member must satisfy enum value set: [{', '.join(enum)}]")
            )
        pattern = meta.get("pattern")
        if pattern:
            regex = compiled(pattern)
            if regex is not None and regex.fullmatch(value) is None:
                out.append(
                    Violation(
                        "pattern", names, wire, value, f"Member must satisfy regular expression pattern: {pattern}"
                    )
                )
        return
    if kind in ("integer", "long", "float", "double"):
        _bounds(meta, value, names, wire, value, "value", out)


def _bounds(
    meta: Mapping[str, Any],
    measure: float,
    names: tuple[str | int, ...],
    wire: tuple[str | int, ...],
    value: Any,
    what: str,
    out: list[Violation],
) -> None:
    low, high = meta.get("min"), meta.get("max")
    kind = "length" if what == "length" else "range"
    if low is not None and measure < low:
        out.append(Violation(kind, names, wire, value, f"Member must have {what} greater than or equal to {low}"))
    elif high is not None and measure > high:
        out.append(Violation(kind, names, wire, value, f"Member must have {what} less than or equal to {high}"))
