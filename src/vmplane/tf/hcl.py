"""A small HCL writer whose output is already `terraform fmt`-clean and deterministic.

It knows the few layout rules `terraform fmt` applies: two-space indentation, and `=` aligned across a
run of consecutive single-line attributes (a multi-line value, a nested block or a blank line ends the
run). Values are Python data: str (a quoted string), `Expr` (raw HCL), int/float/bool, list, dict
(an object, keys in the order given), `Heredoc`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Expr:
    """Raw HCL: a reference or function call, written as is."""

    text: str


@dataclass(frozen=True)
class Heredoc:
    """A multi-line string written verbatim between `<<MARKER` lines (template sequences escaped)."""

    text: str
    marker: str = "EOT"


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Blank:
    pass


Value = Union[str, Expr, Heredoc, int, float, bool, None, list["Value"], dict[Any, "Value"]]  # noqa: UP007  (keys: str or Expr)


@dataclass
class Block:
    type: str
    labels: list[str] = field(default_factory=list)
    body: list[Item] = field(default_factory=list)

    def attr(self, name: str, value: Value) -> Block:
        self.body.append(Attr(name, value))
        return self

    def block(self, type_: str, *labels: str) -> Block:
        child = Block(type_, list(labels))
        self.body.append(child)
        return child

    def comment(self, text: str) -> Block:
        self.body.append(Comment(text))
        return self

    def blank(self) -> Block:
        self.body.append(Blank())
        return self


@dataclass(frozen=True)
class Attr:
    name: str
    value: Value


Item = Union[Attr, Block, Comment, Blank]  # noqa: UP007


def quote(s: str) -> str:
    """An HCL string literal: JSON escapes, plus `${` and `%{` escaped so nothing is interpolated."""
    return json.dumps(s, ensure_ascii=False).replace("${", "$${").replace("%{", "%%{")


def _key(k: object) -> str:
    if isinstance(k, Expr):
        return k.text  # a computed key, e.g. `(local.role_key)`
    assert isinstance(k, str)
    return k if _IDENT.match(k) else quote(k)


def _scalar(v: Value) -> str | None:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return json.dumps(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, Expr) and "\n" not in v.text:
        return v.text
    return None


def _inline(v: Value) -> str | None:
    """The one-line form of a value, or None when it must span lines."""
    s = _scalar(v)
    if s is not None:
        return s
    if isinstance(v, list):
        parts = [_scalar(x) for x in v]
        if all(p is not None for p in parts) and sum(len(p) for p in parts if p) < 80:
            return "[" + ", ".join(p for p in parts if p is not None) + "]"
        return None
    if isinstance(v, dict) and not v:
        return "{}"
    return None


def _value_lines(v: Value, indent: str) -> list[str]:
    """A value as lines; the first line continues `name = `, the rest are fully indented."""
    inline = _inline(v)
    if inline is not None:
        return [inline]
    inner = indent + "  "
    if isinstance(v, Expr):
        # A multi-line expression is written for an attribute one level deep; shift it to this depth.
        first, *rest = v.text.split("\n")
        return [first, *(indent[2:] + line for line in rest)]
    if isinstance(v, Heredoc):
        text = v.text.replace("${", "$${").replace("%{", "%%{")
        body = text if text.endswith("\n") else text + "\n"
        return [f"<<{v.marker}", *body[:-1].split("\n"), v.marker]
    if isinstance(v, list):
        out = ["["]
        for x in v:
            lines = _value_lines(x, inner)
            out.append(inner + lines[0])
            out.extend(lines[1:])
            out[-1] += ","
        return [*out, indent + "]"]
    assert isinstance(v, dict)
    return ["{", *_attrs([Attr(_key(k), x) for k, x in v.items()], inner), indent + "}"]


def _attrs(items: list[Item], indent: str) -> list[str]:
    """Body lines, with `=` aligned over runs of single-line attributes. A heredoc counts as one line
    (`terraform fmt` sees its body as one token), so consecutive heredoc attributes align too."""
    out: list[str] = []
    run: list[tuple[str, list[str]]] = []

    def flush() -> None:
        width = max((len(n) for n, _ in run), default=0)
        for n, (first, *rest) in run:
            out.append(f"{indent}{n.ljust(width)} = {first}")
            out.extend(rest)
        run.clear()

    for item in items:
        if isinstance(item, Attr):
            lines = _value_lines(item.value, indent)
            if len(lines) == 1 or isinstance(item.value, Heredoc):
                run.append((item.name, lines))
                continue
            flush()
            out.append(f"{indent}{item.name} = {lines[0]}")
            out.extend(lines[1:])
            continue
        flush()
        if isinstance(item, Block):
            out.extend(_block(item, indent))
        elif isinstance(item, Comment):
            out.extend(f"{indent}# {line}".rstrip() for line in item.text.split("\n"))
        else:
            out.append("")
    flush()
    return out


def _block(b: Block, indent: str) -> list[str]:
    head = " ".join([b.type, *(quote(label) for label in b.labels)])
    if not b.body:
        return [f"{indent}{head} {{}}"]
    return [f"{indent}{head} {{", *_attrs(b.body, indent + "  "), f"{indent}}}"]


def render(items: list[Item]) -> str:
    """Top-level blocks and comments, one blank line between blocks."""
    out: list[str] = []
    for item in items:
        if isinstance(item, Block):
            if out and out[-1] != "":
                out.append("")
            out.extend(_block(item, ""))
        elif isinstance(item, Comment):
            out.extend(f"# {line}".rstrip() for line in item.text.split("\n"))
        elif isinstance(item, Blank):
            out.append("")
    return "\n".join(out).strip("\n") + "\n"
