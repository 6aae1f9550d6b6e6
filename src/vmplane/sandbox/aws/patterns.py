"""botocore's `pattern` traits are Java regular expressions (AWS's services match them with
`Pattern.matches`, the whole value): translated here into Python's `re`.

What differs and is translated: `\\p{L}`-style Unicode categories and `\\p{ASCII}` (Python's `re` has
none: expanded into explicit ranges from `unicodedata`), UTF-16 surrogate pairs written as two `\\uD8xx`
escapes (one code point above U+FFFF in Python), a `-` right after a class escape inside `[...]` (a literal
in Java, a bad range in Python), and `\\z`. A pattern that still does not compile is skipped and counted
(`skipped()`): the member is then checked for everything but its pattern.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata

_CATEGORY = re.compile(r"\\([pP])\{(?:Is)?([A-Za-z]+)\}")
_SURROGATES = re.compile(r"\\u(D[89AB][0-9A-F]{2})\\u(D[C-F][0-9A-F]{2})", re.IGNORECASE)
_skipped: dict[str, str] = {}
_lock = threading.Lock()


@functools.cache
def _ranges(category: str) -> str:
    """A character-class body for a Unicode general category ("L", "Nd", ...) or ASCII."""
    if category == "ASCII":
        return "\\x00-\\x7f"
    if category == "Alnum":
        return "a-zA-Z0-9"
    points = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)).startswith(category)]
    out, start, prev = [], None, None
    for c in [*points, -2]:
        if start is None:
            start = prev = c
        elif c == prev + 1:  # type: ignore[operator]
            prev = c
        else:
            out.append(_esc(start) if start == prev else f"{_esc(start)}-{_esc(prev)}")  # type: ignore[arg-type]
            start = prev = c
    return "".join(out)


def _esc(c: int) -> str:
    return f"\\U{c:08x}"


def translate(java: str) -> str:
    """Java regex -> Python regex (raises ValueError for a construct with no Python equivalent)."""
    text = _SURROGATES.sub(lambda m: _esc(_pair(m.group(1), m.group(2))), java)
    out: list[str] = []
    i, in_class, after_escape_class = 0, False, False
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            m = _CATEGORY.match(text, i)
            if m:
                body = _ranges(m.group(2))
                if not body:
                    raise ValueError(f"unknown Unicode category {m.group(2)}")
                negated = m.group(1) == "P"
                if in_class:
                    if negated:
                        raise ValueError("a negated category inside a class")
                    out.append(body)
                else:
                    out.append(f"[{'^' if negated else ''}{body}]")
                i, after_escape_class = m.end(), True
                continue
            nxt = text[i + 1]
            out.append("\\Z" if nxt == "z" else text[i : i + 2])
            after_escape_class = nxt in "wWdDsS"
            i += 2
            continue
        if in_class:
            if ch == "[":
                raise ValueError("a nested character class (a Java union)")
            if ch == "&" and text.startswith("&&", i):
                raise ValueError("a character-class intersection")
            if ch == "-" and after_escape_class:
                out.append("\\-")
                i, after_escape_class = i + 1, False
                continue
            if ch == "]" and out and out[-1] not in ("[", "[^"):
                in_class = False
        elif ch == "[":
            in_class = True
            if text.startswith("[^", i):
                out.append("[^")
                i += 2
                after_escape_class = False
                continue
        out.append(ch)
        after_escape_class = False
        i += 1
    return "".join(out)


def _pair(high: str, low: str) -> int:
    return 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)


@functools.cache
def compiled(java: str) -> re.Pattern[str] | None:
    """The pattern, compiled once, or None (skipped and recorded) when Python cannot express it."""
    try:
        return re.compile(translate(java))
    except (ValueError, re.error) as e:
        with _lock:
            _skipped[java] = str(e)
        return None


def skipped() -> dict[str, str]:
    """Patterns seen and skipped so far: pattern -> why."""
    with _lock:
        return dict(_skipped)
