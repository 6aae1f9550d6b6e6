"""Version ordering of the two package formats vmplane pins: Debian's (dpkg) and RPM's (rpmvercmp)."""

from __future__ import annotations

import re
from functools import cmp_to_key


def debian_compare(a: str, b: str) -> int:
    """dpkg's ordering of `[epoch:]upstream[-revision]`: <0, 0 or >0 as a is older, equal or newer."""
    ea, ua, ra = _split_debian(a)
    eb, ub, rb = _split_debian(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _debian_part(ua, ub) or _debian_part(ra, rb)


def _split_debian(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or "0"), upstream, revision


def _order(c: str) -> int:
    """dpkg's weight of a non-digit: `~` sorts before everything, even the end; letters before others."""
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _debian_part(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i, j = i + 1, j + 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


_RPM_SEGMENT = re.compile(r"(\d+)|([a-zA-Z]+)|(~)|(\^)")


def rpm_compare(a: str, b: str) -> int:
    """rpmvercmp on one field (version or release): alphanumeric runs, digits newer than letters,
    `~` older than anything, `^` newer than the end but older than more segments."""
    if a == b:
        return 0
    sa, sb = _rpm_segments(a), _rpm_segments(b)
    for x, y in zip(sa, sb, strict=False):
        if x == y:
            continue
        if x == "~" or y == "~":
            return -1 if x == "~" else 1
        if x == "^" or y == "^":
            return -1 if x == "^" else 1
        if x.isdigit() != y.isdigit():
            return 1 if x.isdigit() else -1
        if x.isdigit():
            return (int(x) > int(y)) - (int(x) < int(y))
        return -1 if x < y else 1
    if len(sa) == len(sb):
        return 0
    longer, sign = (sa, 1) if len(sa) > len(sb) else (sb, -1)
    rest = longer[min(len(sa), len(sb))]
    # The longer one is newer, unless what it has more starts with `~` (a pre-release).
    if rest == "~":
        return -sign
    return sign


def _rpm_segments(v: str) -> list[str]:
    return [m.group(0) for m in _RPM_SEGMENT.finditer(v)]


def rpm_evr_compare(a: tuple[str, str, str], b: tuple[str, str, str]) -> int:
    """(epoch, version, release) ordering."""
    ea, eb = int(a[0] or "0"), int(b[0] or "0")
    if ea != eb:
        return -1 if ea < eb else 1
    return rpm_compare(a[1], b[1]) or rpm_compare(a[2], b[2])


debian_key = cmp_to_key(debian_compare)
