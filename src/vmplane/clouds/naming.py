"""Fitting a name to a cloud's length limit, shared by every driver's naming module.

Existing environments are found by name, so a name that fits comes back unchanged, byte for byte, and a
long one always trims the same way: its head and a digest of the whole, so two long names that share a
head stay distinct.
"""

from __future__ import annotations

import hashlib

# Hex characters of sha1 in a trimmed name's tail: the layout every driver's names always had.
TAIL = 8


def digest(text: str, n: int = TAIL) -> str:
    """The first `n` hex characters of `text`'s sha1: a stable, short stand-in for it."""
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def fit(name: str, limit: int) -> str:
    """`name` if it fits `limit`, else its head (without a trailing '-') and `-<digest of the whole>`,
    at most `limit` characters."""
    if len(name) <= limit:
        return name
    if limit <= TAIL + 1:
        raise ValueError(f"a limit of {limit} leaves no room for a name's head and its {TAIL}-character digest")
    return f"{name[: limit - TAIL - 1].rstrip('-')}-{digest(name)}"
