"""The `filter` of compute list calls: `name = "x"`, `name eq x`, `labels.k = "v"`, `description eq .*x.*`.

`=`/`!=` compare literally (`*` is a wildcard), `eq`/`ne` match an RE2-style regex against the whole
value, clauses side by side (optionally in parentheses, with AND) must all hold. OR is refused rather
than guessed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any

from vmplane.sandbox.gcp.errors import invalid

_CLAUSE = re.compile(r'\(?\s*([A-Za-z][\w.\-]*)\s*(!=|=|\bne\b|\beq\b|:)\s*("(?:[^"\\]|\\.)*"|[^\s)]+)\s*\)?')


def compile_filter(text: str | None) -> Callable[[dict[str, Any]], bool]:
    if not text or not text.strip():
        return lambda _r: True
    if re.search(r"\bOR\b", text):
        raise invalid(f"Invalid value for field 'filter': '{text}'. The sandbox supports only AND of clauses.")
    clauses = []
    pos = 0
    rest = text.strip()
    while pos < len(rest):
        m = _CLAUSE.match(rest, pos)
        if m is None:
            raise invalid(f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.")
        field, op, raw = m.groups()
        value = raw[1:-1].replace('\\"', '"') if raw.startswith('"') else raw
        clauses.append((field, op, value))
        pos = m.end()
        skip = re.compile(r"\s*(AND\s+)?").match(rest, pos)
        pos = skip.end() if skip else pos

    def matches(resource: dict[str, Any]) -> bool:
        return all(_holds(_lookup(resource, f), op, v) for f, op, v in clauses)

    return matches


def _lookup(resource: dict[str, Any], dotted: str) -> Any:
    value: Any = resource
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if not isinstance(value, dict):
            return None
        if part == "labels" and i + 1 < len(parts):  # label keys may contain dots nowhere, dashes anywhere
            return (value.get("labels") or {}).get(".".join(parts[i + 1 :]))
        value = value.get(part)
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _holds(actual: Any, op: str, expected: str) -> bool:
    text = _text(actual)
    if op == ":":
        return text is not None and (expected == "*" or expected in text)
    if op in ("eq", "ne"):
        hit = text is not None and re.fullmatch(expected, text) is not None
        return hit if op == "eq" else not hit
    hit = text is not None and fnmatch.fnmatchcase(text, expected)
    return hit if op == "=" else not hit
