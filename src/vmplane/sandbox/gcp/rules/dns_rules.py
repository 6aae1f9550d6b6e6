"""Rules on Cloud DNS record sets: rrdata valid for the record's type, a TTL that is not negative."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.errors import invalid
from vmplane.sandbox.gcp.rules import body, rule
from vmplane.sandbox.gcp.rules.examples import record

_DOC = "https://cloud.google.com/dns/docs/records-overview"
_REF = "https://cloud.google.com/dns/docs/reference/rest/v1/resourceRecordSets"
_HOST = re.compile(r"(?:[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9])?\.)+")
_MX = re.compile(r"(\d{1,5}) (\S+)")
_METHODS = ("dns.changes.create",)


def _additions(call: Call) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"entity.change.additions[{i}]", r)
        for i, r in enumerate(body(call).get("additions") or [])
        if isinstance(r, dict)
    ]


def _valid(kind: str, data: str) -> bool:
    try:
        if kind == "A":
            return isinstance(ipaddress.ip_address(data), ipaddress.IPv4Address)
        if kind == "AAAA":
            return isinstance(ipaddress.ip_address(data), ipaddress.IPv6Address)
    except ValueError:
        return False
    if kind in ("CNAME", "NS", "PTR"):
        return bool(_HOST.fullmatch(data))
    if kind == "MX":
        found = _MX.fullmatch(data)
        return found is not None and int(found.group(1)) <= 65535 and bool(_HOST.fullmatch(found.group(2)))
    if kind == "TXT":  # each quoted character string is at most 255 characters (RFC 1035 3.3)
        return all(len(part) <= 255 for part in re.findall(r'"((?:[^"\\]|\\.)*)"', data) or [data])
    return True  # the sandbox does not parse the other types' rrdata


def _rrdata(call: Call) -> None:
    for where, rrset in _additions(call):
        for j, data in enumerate(rrset.get("rrdatas") or []):
            if not _valid(str(rrset.get("type")), str(data)):
                raise invalid(f"Invalid value for '{where}.rrdata[{j}]': '{data}'")


def _cname_single(call: Call) -> None:
    for where, rrset in _additions(call):
        if rrset.get("type") == "CNAME" and len(rrset.get("rrdatas") or []) > 1:
            raise invalid(f"Invalid value for '{where}.rrdata': a CNAME record set holds exactly one rrdata.")


def _ttl(call: Call) -> None:
    for where, rrset in _additions(call):
        if rrset.get("ttl") is not None and int(rrset["ttl"]) < 0:
            raise invalid(f"Invalid value for '{where}.ttl': '{rrset['ttl']}'")


for _id, _summary, _source, _example, _check in (
    (
        "dns.a-rrdata",
        "an A record whose rrdata is not an IPv4 address",
        _DOC,
        (record("A", ["203.0.113.300"]),),
        _rrdata,
    ),
    (
        "dns.aaaa-rrdata",
        "an AAAA record whose rrdata is not an IPv6 address",
        _DOC,
        (record("AAAA", ["203.0.113.1"]),),
        _rrdata,
    ),
    (
        "dns.cname-rrdata",
        "a CNAME, NS or PTR rrdata that is not a fully qualified name",
        _DOC,
        (record("CNAME", ["lb.example.com"]),),
        _rrdata,
    ),
    (
        "dns.mx-rrdata",
        "an MX rrdata that is not `preference host.`",
        _DOC,
        (record("MX", ["mail.example.com."]),),
        _rrdata,
    ),
    (
        "dns.txt-rrdata",
        "a TXT character string over 255 characters",
        _DOC,
        (record("TXT", ['"' + "x" * 300 + '"']),),
        _rrdata,
    ),
    (
        "dns.cname-single",
        "a CNAME record set with more than one rrdata",
        _DOC,
        (record("CNAME", ["a.example.com.", "b.example.com."]),),
        _cname_single,
    ),
    ("dns.ttl-not-negative", "a negative TTL", _REF, (record("A", ["203.0.113.1"], ttl=-1),), _ttl),
):
    rule(_id, _METHODS, _summary, _source, "400 invalid", "200", _example, _check)
