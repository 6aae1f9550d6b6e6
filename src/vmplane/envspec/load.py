"""Load an environment spec file and report every problem at once, each at its line and column.

Pydantic reports errors by model location (snake/alias names, discriminator tags inserted); users
think in the file's camelCase paths and editor positions. This module translates one into the other.
Keep imports light: `vmplane validate` imports this and must start fast (no boto3, dbos, sqlalchemy).
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Tag, ValidationError

from vmplane.envspec.jsonc import JsoncSyntaxError, JsonPath, Position, Positions, parse_jsonc
from vmplane.envspec.models import DNS_LABEL, NETWORK_SYNONYMS, EnvSpec
from vmplane.envspec.provider import ProviderBase, cloud_spec, spec_for
from vmplane.errors import UsageError

_PLAIN_KEY_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")
_QUOTED_RE = re.compile(r"'([^']*)'")
_SHOULD_RE = re.compile(r"^(?:Input|String|List|Dictionary|Value|Number) should ")
_MAX_SHOWN = 40  # longest input value quoted back in a message

_EXPECTED_TYPES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec file. `path` uses the file's names, e.g. `pools.web.size`; root is `$`."""

    path: str
    message: str
    line: int
    col: int


class SpecError(UsageError):
    """A spec file that cannot be used; `issues` holds every problem found, sorted by position."""

    def __init__(self, file: str, issues: Iterable[SpecIssue]) -> None:
        self.file = file
        self.issues = sorted(dict.fromkeys(issues), key=lambda i: (i.line, i.col, i.path))
        super().__init__(self.format())

    def format(self) -> str:
        return "\n".join(f"{self.file}:{i.line}:{i.col}: {i.path}: {i.message}" for i in self.issues)

    def summary(self) -> str:
        n = len(self.issues)
        return f"{n} error{'s' if n != 1 else ''} in {self.file}; nothing was created."


def load_spec(path: str | Path) -> EnvSpec:
    """Read and validate a JSONC spec file; raises SpecError (never OSError) on any problem."""
    path = Path(path)
    try:
        # utf-8-sig: a BOM would otherwise shift every column on line 1.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise _file_error(path, "file not found") from None
    except IsADirectoryError:
        raise _file_error(path, "is a directory, not a spec file") from None
    except PermissionError:
        raise _file_error(path, "permission denied") from None
    except UnicodeDecodeError as e:
        raise _file_error(path, f"not UTF-8 text (bad byte at offset {e.start})") from None
    except OSError as e:
        raise _file_error(path, f"cannot read file: {e.strerror or e}") from None
    return parse_spec_text(text, str(path))


def parse_spec_text(text: str, filename: str) -> EnvSpec:
    """Parse and validate spec text; `filename` is only used in error messages."""
    try:
        data, positions = parse_jsonc(text)
    except JsoncSyntaxError as e:
        path = _format_path(e.path) if e.path is not None else "$"
        raise SpecError(filename, [SpecIssue(path, e.message, e.line, e.col)]) from None
    try:
        # Strict JSON-mode validation: "size": "2" is a mistake in a config file, not something to coerce.
        return EnvSpec.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as e:
        issues = [_issue(err, data, positions) for err in e.errors(include_url=False)]
        raise SpecError(filename, issues) from None


def _file_error(path: Path, message: str) -> SpecError:
    return SpecError(str(path), [SpecIssue("$", message, 1, 1)])


# -- pydantic error -> SpecIssue -----------------------------------------------------------------


def _issue(err: Any, data: Any, positions: Positions) -> SpecIssue:
    """Translate one pydantic error entry into a positioned, human-worded issue."""
    kind: str = err["type"]
    loc = tuple(err["loc"])
    if kind == "extra_forbidden":
        parent, model = _resolve(loc[:-1], data)
        key = str(loc[-1])
        return _at_key((*parent, key), positions, _unknown_field(key, model))
    path, _ = _resolve(loc, data)
    path = _as_written(path, data)
    node = _node_at(data, path)
    if kind == "missing":
        return _at_value(path[:-1], positions, f"missing required field {str(path[-1])!r}")
    if kind == "union_tag_not_found" and isinstance(node, dict):
        return _at_value(path, positions, f"missing required field {_discriminator(err)!r}")
    if kind == "union_tag_invalid" and isinstance(node, dict):
        disc = _discriminator(err)
        expected = _QUOTED_RE.findall(err["ctx"]["expected_tags"])
        message = _not_one_of(node.get(disc), expected)
        return _at_value((*path, disc), positions, message)
    return _at_value(path, positions, _humanize(err, node))


def _at_value(path: JsonPath, positions: Positions, message: str) -> SpecIssue:
    """Position at the value for `path`, or at the nearest ancestor that exists in the file."""
    for depth in range(len(path), -1, -1):
        if (pos := positions.values.get(path[:depth])) is not None:
            return _make(path[:depth] if depth < len(path) else path, pos, message)
    return _make(path, (1, 1), message)


def _at_key(path: JsonPath, positions: Positions, message: str) -> SpecIssue:
    pos = positions.keys.get(path)
    return _make(path, pos, message) if pos is not None else _at_value(path, positions, message)


def _make(path: JsonPath, pos: Position, message: str) -> SpecIssue:
    return SpecIssue(_format_path(path), message, pos[0], pos[1])


def _unknown_field(key: str, model: type[BaseModel] | None) -> str:
    message = f"unknown field {key!r}"
    close = _closest(key, _aliases(model)) if model is not None else None
    return f"{message}; did you mean {close!r}?" if close else message


def _not_one_of(value: Any, expected: list[str]) -> str:
    got = repr(_short(value)) if isinstance(value, str) else _json_kind(value)
    message = f"must be one of {', '.join(repr(e) for e in expected)}, got {got}"
    close = _closest(value, expected) if isinstance(value, str) else None
    return f"{message}; did you mean {close!r}?" if close else message


def _closest(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return close[0]
    # Case slips (ssm, instancetype, INSTANCE_TYPE) score low on plain similarity; compare folded names.
    folded = {c.lower().replace("_", ""): c for c in choices}
    return folded.get(word.lower().replace("_", ""))


def _humanize(err: Any, node: Any) -> str:
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    msg: str = err["msg"]
    if kind in ("value_error", "assertion_error"):
        return msg.split(", ", 1)[1] if msg.startswith(("Value error, ", "Assertion failed, ")) else msg
    if kind in _EXPECTED_TYPES:
        return f"expected {_EXPECTED_TYPES[kind]}, got {_json_kind(node)}"
    if kind in ("enum", "literal_error"):
        return _not_one_of(node, _QUOTED_RE.findall(str(ctx.get("expected", ""))))
    if kind == "string_pattern_mismatch":
        if ctx.get("pattern") == DNS_LABEL:
            return "must be a DNS label: 1-32 lowercase letters, digits or '-', starting with a letter"
        return f"must match the pattern {ctx.get('pattern')!r}"
    if kind == "too_short" and isinstance(node, dict):
        n = ctx.get("min_length", 1)
        return f"needs at least {n} {'entry' if n == 1 else 'entries'}"
    return _SHOULD_RE.sub("must ", msg)


def _discriminator(err: Any) -> str:
    return str(err["ctx"]["discriminator"]).strip("'")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {_short(value)}"
    if isinstance(value, str):
        return f"the string {_short(value)!r}"
    return "an array" if isinstance(value, list) else "an object"


def _short(value: Any) -> str:
    """The value as the user wrote it, cut short: messages must stay one readable line."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _format_path(path: JsonPath) -> str:
    """`pools.web.size`, `network.ingressPorts[0]`, `runtime.files["/etc/app.conf"]`; root is `$`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY_RE.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out or "$"


# -- walking the model tree along a pydantic loc -------------------------------------------------


def _resolve(loc: tuple[str | int, ...], data: Any) -> tuple[JsonPath, type[BaseModel] | None]:
    """Map a pydantic loc to the file's JSON path (discriminator tags dropped) and the model there."""
    path: list[str | int] = []
    tp: Any = EnvSpec
    for part in loc:
        tp = _provider_member(_unwrap(tp), _node_at(data, tuple(path)))
        members = _union_models(tp)
        if members:
            tagged = _member_for_tag(members, part)
            if tagged is not None:  # pydantic inserts the tag into the loc: not a key in the file
                tp = tagged
                continue
            tp = _member_for_tag(members, _tag_of(members, _node_at(data, tuple(path)))) or Any
        elif _is_union(tp) and isinstance(part, str):
            # A scalar union (int | str) names the member that failed, a callable discriminator its tag
            # (a runtime value's `plain-value`/`secret-ref`): not a key either.
            if (member := _tagged_member(tp, part)) is not None:
                tp = member
                continue
            models = [m for a in typing.get_args(tp) if isinstance(m := _unwrap(a), type) and issubclass(m, BaseModel)]
            if not models or not isinstance(_node_at(data, tuple(path)), dict):
                continue
            tp = models[0]  # a key of the object member (a check after validation names it untagged)
        tp = _child_type(tp, part)
        path.append(part)
    return tuple(path), _model_at(tp, _node_at(data, tuple(path)))


def _model_at(tp: Any, node: Any) -> type[BaseModel] | None:
    tp = _provider_member(_unwrap(tp), node)
    members = _union_models(tp)
    if members:
        tp = _member_for_tag(members, _tag_of(members, node))
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _provider_member(tp: Any, node: Any) -> Any:
    """`provider` is validated by the shape its `cloud` names: walk into that shape."""
    if tp is not ProviderBase:
        return tp
    spec = spec_for(node)
    return spec.provider if spec is not None else Any


def _child_type(tp: Any, part: str | int) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, info in tp.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return Any
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin is list and args:
        return args[0]
    return Any


def _unwrap(tp: Any) -> Any:
    """Strip Annotated[...] and Optional[...] so the walk sees the real container or model."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if _is_union(tp):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(rest) == 1:
                tp = rest[0]
                continue
        return tp


def _tagged_member(tp: Any, tag: str) -> Any:
    """The member of a union whose `Tag` is `tag`, or None."""
    for arg in typing.get_args(tp):
        if typing.get_origin(arg) is typing.Annotated and any(
            isinstance(m, Tag) and m.tag == tag for m in arg.__metadata__
        ):
            return typing.get_args(arg)[0]
    return None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _union_models(tp: Any) -> list[type[BaseModel]]:
    if not _is_union(tp):
        return []
    return [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]


def _tag_field(member: type[BaseModel]) -> str | None:
    """The discriminator of a tagged-union member: its Literal field (pools: mode, provider: cloud)."""
    for name, info in member.model_fields.items():
        if typing.get_origin(info.annotation) is typing.Literal:
            return info.alias or name
    return None


def _member_for_tag(members: list[type[BaseModel]], tag: Any) -> type[BaseModel] | None:
    for member in members:
        field = _tag_field(member)
        info = member.model_fields.get(field or "")
        if info is not None and isinstance(tag, str) and tag in typing.get_args(info.annotation):
            return member
    return None


def _tag_of(members: list[type[BaseModel]], node: Any) -> Any:
    field = _tag_field(members[0])
    return node.get(field) if isinstance(node, dict) and field else None


def _as_written(path: JsonPath, data: Any) -> JsonPath:
    """The path with a cloud-neutral synonym (existingNetwork) where the file used it, and without the cloud's
    key where the file wrote a setting at its old place (`pools.web.template`), so the issue points at the key
    the user wrote rather than the recorded name it was mapped to."""
    for i, part in enumerate(path):
        parent = _node_at(data, path[:i])
        if isinstance(parent, dict) and part not in parent:
            for neutral, key in NETWORK_SYNONYMS.items():
                if part == key and neutral in parent:
                    return (*path[:i], neutral, *path[i + 1 :])
            moved = i + 1 < len(path) and path[i + 1] in parent
            if isinstance(part, str) and cloud_spec(part) is not None and moved:
                return (*path[:i], *path[i + 1 :])
    return path


def _aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _node_at(data: Any, path: JsonPath) -> Any:
    node = data
    for part in path:
        found = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if not found:
            return None
        node = node[part]
    return node
