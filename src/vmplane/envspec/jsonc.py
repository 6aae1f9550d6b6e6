"""A small JSONC parser that remembers where every value and key starts.

JSONC here is JSON plus `//` and `/* */` comments and trailing commas in objects and arrays. The
standard library's `json` cannot report positions for values it parsed successfully, and the spec
loader needs them to point validation errors at the exact line and column, so this is hand-written.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Any

JsonPath = tuple[str | int, ...]
Position = tuple[int, int]  # (line, col), both 1-based

# Deep enough for any real spec, shallow enough to stay far from Python's recursion limit.
MAX_DEPTH = 200

_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WORD_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBERISH_RE = re.compile(r"[-+.0-9A-Za-z]+")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WHITESPACE = " \t\r\n\ufeff"
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


class JsoncSyntaxError(ValueError):
    """The text is not valid JSONC; `line`/`col` (1-based) point at the offending character.

    `path` is set when the error belongs to a known place in the document (duplicate keys).
    """

    def __init__(self, message: str, line: int, col: int, path: JsonPath | None = None) -> None:
        super().__init__(f"{line}:{col}: {message}")
        self.message = message
        self.line = line
        self.col = col
        self.path = path


@dataclass
class Positions:
    """Where each value (`values`) and each object key (`keys`) starts, by JSON path."""

    values: dict[JsonPath, Position] = field(default_factory=dict)
    keys: dict[JsonPath, Position] = field(default_factory=dict)


def parse_jsonc(text: str) -> tuple[Any, Positions]:
    """Parse JSONC text into Python values (dict/list/str/int/float/bool/None) and their positions."""
    return _Parser(text).parse_document()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.positions = Positions()
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions and errors -------------------------------------------------------------------

    def pos(self, index: int | None = None) -> Position:
        index = self.i if index is None else index
        line = bisect.bisect_right(self._line_starts, index)
        return line, index - self._line_starts[line - 1] + 1

    def error(self, message: str, index: int | None = None, path: JsonPath | None = None) -> JsoncSyntaxError:
        return JsoncSyntaxError(message, *self.pos(index), path=path)

    def describe_here(self) -> str:
        if self.i >= len(self.text):
            return "end of input"
        return repr(self.text[self.i])

    # -- whitespace and comments ----------------------------------------------------------------

    def skip_blank(self) -> None:
        text, n = self.text, len(self.text)
        while self.i < n:
            ch = text[self.i]
            if ch in _WHITESPACE:
                self.i += 1
            elif text.startswith("//", self.i):
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end + 1
            elif text.startswith("/*", self.i):
                end = text.find("*/", self.i + 2)
                if end < 0:
                    raise self.error("unterminated block comment")
                self.i = end + 2
            else:
                return

    # -- grammar --------------------------------------------------------------------------------

    def parse_document(self) -> tuple[Any, Positions]:
        self.skip_blank()
        if self.i >= len(self.text):
            raise self.error("empty document: expected a JSON value")
        value = self.parse_value((), 0)
        self.skip_blank()
        if self.i < len(self.text):
            raise self.error(f"unexpected {self.describe_here()} after the top-level value")
        return value, self.positions

    def parse_value(self, path: JsonPath, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH} levels")
        self.positions.values[path] = self.pos()
        ch = self.text[self.i] if self.i < len(self.text) else ""
        if ch == "{":
            return self.parse_object(path, depth)
        if ch == "[":
            return self.parse_array(path, depth)
        if ch == '"':
            return self.parse_string()
        if ch == "-" or ch.isdigit():
            return self.parse_number()
        return self.parse_literal()

    def parse_object(self, path: JsonPath, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        self.i += 1  # "{"
        self.skip_blank()
        while not self.consume("}"):
            key_index = self.i
            key = self.parse_key()
            member = (*path, key)
            if key in result:
                raise self.error(f"duplicate key {key!r}", key_index, path=member)
            self.positions.keys[member] = self.pos(key_index)
            self.skip_blank()
            if not self.consume(":"):
                raise self.error("expected ':' after object key")
            self.skip_blank()
            result[key] = self.parse_value(member, depth + 1)
            self.skip_blank()
            if self.consume(","):
                self.skip_blank()  # a trailing comma is allowed: "}" may follow
            elif not self.peek("}"):
                raise self.error("expected ',' or '}' after object member")
        return result

    def parse_array(self, path: JsonPath, depth: int) -> list[Any]:
        result: list[Any] = []
        self.i += 1  # "["
        self.skip_blank()
        while not self.consume("]"):
            if self.peek(","):
                raise self.error("expected a value before ','")
            result.append(self.parse_value((*path, len(result)), depth + 1))
            self.skip_blank()
            if self.consume(","):
                self.skip_blank()
            elif not self.peek("]"):
                raise self.error("expected ',' or ']' after array element")
        return result

    def parse_key(self) -> str:
        if self.peek('"'):
            return self.parse_string()
        if self.i >= len(self.text):
            raise self.error("unexpected end of input: expected an object key or '}'")
        if self.peek("'"):
            raise self.error("strings must use double quotes")
        if _WORD_RE.match(self.text, self.i):
            raise self.error("object keys must be double-quoted strings")
        raise self.error(f"expected an object key or '}}', found {self.describe_here()}")

    def parse_string(self) -> str:
        start = self.i
        self.i += 1  # opening quote
        parts: list[str] = []
        text, n = self.text, len(self.text)
        while True:
            run_start = self.i
            while self.i < n and text[self.i] not in '"\\' and text[self.i] >= " ":
                self.i += 1
            parts.append(text[run_start : self.i])
            if self.i >= n or text[self.i] in "\r\n":
                raise self.error("unterminated string", start)
            ch = text[self.i]
            if ch == '"':
                self.i += 1
                return "".join(parts)
            if ch == "\\":
                parts.append(self.parse_escape())
            else:
                raise self.error(f"control character {ch!r} in string must be escaped")

    def parse_escape(self) -> str:
        start = self.i
        self.i += 1  # backslash
        ch = self.text[self.i : self.i + 1]
        if ch in _ESCAPES:
            self.i += 1
            return _ESCAPES[ch]
        if ch != "u":
            raise self.error(f"invalid escape sequence '\\{ch}'" if ch else "unterminated string", start)
        code = self.parse_hex4(start)
        # A high surrogate followed by an escaped low surrogate is one astral character (e.g. emoji).
        if 0xD800 <= code <= 0xDBFF and self.text.startswith("\\u", self.i):
            save = self.i
            self.i += 1
            low = self.parse_hex4(save)
            if 0xDC00 <= low <= 0xDFFF:
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            self.i = save
        return chr(code)

    def parse_hex4(self, escape_start: int) -> int:
        digits = self.text[self.i + 1 : self.i + 5]
        if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise self.error("invalid \\u escape: expected 4 hex digits", escape_start)
        self.i += 5
        return int(digits, 16)

    def parse_number(self) -> int | float:
        start = self.i
        m = _NUMBER_RE.match(self.text, start)
        # Glued characters ("01", "1.2.3", "1x", "-") make the whole token invalid, not just its tail.
        tail = _NUMBERISH_RE.match(self.text, m.end() if m else start)
        if m is None or tail:
            bad = self.text[start : tail.end() if tail else start + 1]
            raise self.error(f"invalid number {bad!r}", start)
        self.i = m.end()
        if not (m.group(1) or m.group(2)):
            return int(m.group(0))
        value = float(m.group(0))
        if math.isinf(value):
            raise self.error(f"number {m.group(0)!r} is out of range", start)
        return value

    def parse_literal(self) -> Any:
        start = self.i
        m = _WORD_RE.match(self.text, start)
        if m is None:
            if self.i >= len(self.text):
                raise self.error("unexpected end of input: expected a value")
            if self.peek("'"):
                raise self.error("strings must use double quotes")
            raise self.error(f"expected a value, found {self.describe_here()}")
        word = m.group(0)
        if word not in _LITERALS:
            hint = "" if word in ("NaN", "Infinity") else " (strings must be double-quoted)"
            raise self.error(f"unexpected {word!r}: expected a value{hint}", start)
        self.i = m.end()
        return _LITERALS[word]

    # -- helpers --------------------------------------------------------------------------------

    def peek(self, ch: str) -> bool:
        return self.text.startswith(ch, self.i)

    def consume(self, ch: str) -> bool:
        if self.text.startswith(ch, self.i):
            self.i += len(ch)
            return True
        return False
