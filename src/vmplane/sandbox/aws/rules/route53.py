"""Route 53 change batches as AWS checks them: a CREATE of a record that exists, a DELETE that does not
match, an alias to nothing, CNAMEs at the apex or beside other records, names outside the zone, A values
that are not IPv4 addresses, the same record twice in one batch. AWS answers InvalidChangeBatch to all."""

from __future__ import annotations

import ipaddress
from typing import Any

from vmplane.sandbox.aws.rule import AwsFault, AwsRequest, Clients, Rule
from vmplane.sandbox.aws.rules._common import backend, fault, make_rule, p, request

_API = "https://docs.aws.amazon.com/Route53/latest/APIReference/API_ChangeResourceRecordSets.html"
_ALIAS = "https://docs.aws.amazon.com/Route53/latest/APIReference/API_AliasTarget.html"
_CNAME = "https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/ResourceRecordTypes.html#CNAMEFormat"
_OP = ("ChangeResourceRecordSets",)


def _norm(name: str) -> str:
    return name.rstrip(".").lower()


def _zone(req: AwsRequest) -> Any:
    zone_id = str(p(req, "HostedZoneId", "")).rsplit("/", 1)[-1]
    return backend("route53", req).zones.get(zone_id)


def _changes(req: AwsRequest) -> list[dict[str, Any]]:
    return list((p(req, "ChangeBatch") or {}).get("Changes") or ())


def _values(records: Any) -> list[str]:
    return sorted(str(r.get("Value") if isinstance(r, dict) else r) for r in records or ())


def _existing(zone: Any, name: str, rtype: str | None = None) -> list[Any]:
    return [r for r in zone.rrsets if _norm(r.name) == _norm(name) and (rtype is None or r.type == rtype)]


def _bad(message: str) -> AwsFault:
    return fault("InvalidChangeBatch", message)


def _create_exists(req: AwsRequest) -> AwsFault | None:
    zone = _zone(req)
    for change in _changes(req) if zone is not None else ():
        rrset = change["ResourceRecordSet"]
        if change["Action"] == "CREATE" and _existing(zone, rrset["Name"], rrset["Type"]):
            return _bad(
                f"[Tried to create resource record set [name='{_norm(rrset['Name'])}.', type='{rrset['Type']}'] "
                "but it already exists]"
            )
    return None


def _delete_mismatch(req: AwsRequest) -> AwsFault | None:
    zone = _zone(req)
    for change in _changes(req) if zone is not None else ():
        rrset = change["ResourceRecordSet"]
        if change["Action"] != "DELETE":
            continue
        found = _existing(zone, rrset["Name"], rrset["Type"])
        label = f"[name='{_norm(rrset['Name'])}.', type='{rrset['Type']}']"
        if not found:
            return _bad(f"[Tried to delete resource record set {label} but it was not found]")
        current = found[0]
        if "ResourceRecords" in rrset and (
            _values(rrset["ResourceRecords"]) != _values(current.records) or str(rrset.get("TTL")) != str(current.ttl)
        ):
            return _bad(
                f"[Tried to delete resource record set {label} but the values provided do not match the current values]"
            )
    return None


def _alias_known(req: AwsRequest, target: dict[str, Any]) -> bool:
    dns = _norm(str(target.get("DNSName", "")))
    for lb in backend("elbv2", req).load_balancers.values():
        if _norm(lb.dns_name) == dns or _norm(f"dualstack.{lb.dns_name}") == dns:
            return True
    target_zone = backend("route53", req).zones.get(str(target.get("HostedZoneId", "")).rsplit("/", 1)[-1])
    if target_zone is not None:
        return bool(_existing(target_zone, dns))
    # A target in a zone the sandbox does not hold (CloudFront, S3 websites): nothing to compare with.
    return not any(s in dns for s in (".elb.amazonaws.com", ".elb.localhost"))


def _alias_nothing(req: AwsRequest) -> AwsFault | None:
    for change in _changes(req):
        rrset = change["ResourceRecordSet"]
        target = rrset.get("AliasTarget")
        if change["Action"] != "DELETE" and target and not _alias_known(req, target):
            return _bad(
                f"[Tried to create an alias that targets {_norm(target['DNSName'])}., type {rrset['Type']} in zone "
                f"{target.get('HostedZoneId')}, but the alias target name does not lie within the target zone]"
            )
    return None


def _cname_apex(req: AwsRequest) -> AwsFault | None:
    zone = _zone(req)
    for change in _changes(req) if zone is not None else ():
        rrset = change["ResourceRecordSet"]
        if change["Action"] != "DELETE" and rrset["Type"] == "CNAME" and _norm(rrset["Name"]) == _norm(zone.name):
            return _bad(
                f"[RRSet of type CNAME with DNS name {_norm(zone.name)}. is not permitted at apex in zone "
                f"{_norm(zone.name)}.]"
            )
    return None


def _cname_conflict(req: AwsRequest) -> AwsFault | None:
    zone = _zone(req)
    for change in _changes(req) if zone is not None else ():
        rrset = change["ResourceRecordSet"]
        if change["Action"] != "CREATE":
            continue
        others = [r for r in _existing(zone, rrset["Name"]) if r.type != rrset["Type"]]
        if others and (rrset["Type"] == "CNAME" or any(r.type == "CNAME" for r in others)):
            return _bad(
                f"[RRSet of type {rrset['Type']} with DNS name {_norm(rrset['Name'])}. is not permitted because a "
                "conflicting RRSet of type CNAME with the same DNS name already exists]"
            )
    return None


def _outside_zone(req: AwsRequest) -> AwsFault | None:
    zone = _zone(req)
    for change in _changes(req) if zone is not None else ():
        name, apex = _norm(change["ResourceRecordSet"]["Name"]), _norm(zone.name)
        if name != apex and not name.endswith("." + apex):
            return _bad(f"[RRSet with DNS name {name}. is not permitted in zone {apex}.]")
    return None


def _a_values(req: AwsRequest) -> AwsFault | None:
    for change in _changes(req):
        rrset = change["ResourceRecordSet"]
        kinds: dict[str, Any] = {"A": ipaddress.IPv4Address, "AAAA": ipaddress.IPv6Address}
        kind = kinds.get(rrset["Type"])
        if kind is None:
            continue
        for value in _values(rrset.get("ResourceRecords")):
            try:
                kind(value)
            except ValueError:
                illegal = "ARRDATAIllegalIPv4Address" if rrset["Type"] == "A" else "AAAARRDATAIllegalIPv6Address"
                return _bad(f"[Invalid Resource Record: 'FATAL problem: {illegal} encountered with '{value}'']")
    return None


def _twice(req: AwsRequest) -> AwsFault | None:
    seen = set()
    for change in _changes(req):
        rrset = change["ResourceRecordSet"]
        key = (_norm(rrset["Name"]), rrset["Type"], rrset.get("SetIdentifier"))
        if key in seen:
            return _bad(
                f"[The request contains an invalid set of changes for a resource record set '{key[1]} {key[0]}.']"
            )
        seen.add(key)
    return None


def _zone_with(clients: Clients, *records: tuple[str, str, str]) -> str:
    r53 = clients("route53")
    zone = r53.create_hosted_zone(Name="example.com", CallerReference="rules")["HostedZone"]["Id"]
    for name, rtype, value in records:
        r53.change_resource_record_sets(
            HostedZoneId=zone, ChangeBatch={"Changes": [_change("CREATE", name, rtype, value)]}
        )
    return str(zone)


def _change(action: str, name: str, rtype: str, value: str, ttl: int = 300) -> dict[str, Any]:
    rrset = {"Name": name, "Type": rtype, "TTL": ttl, "ResourceRecords": [{"Value": value}]}
    return {"Action": action, "ResourceRecordSet": rrset}


def _batch(zone: str, *changes: dict[str, Any]) -> AwsRequest:
    return request("route53", "ChangeResourceRecordSets", HostedZoneId=zone, ChangeBatch={"Changes": list(changes)})


def _ex_create_exists(clients: Clients) -> AwsRequest:
    zone = _zone_with(clients, ("www.example.com", "A", "192.0.2.1"))
    return _batch(zone, _change("CREATE", "www.example.com", "A", "192.0.2.2"))


def _ex_delete_missing(clients: Clients) -> AwsRequest:
    return _batch(_zone_with(clients), _change("DELETE", "www.example.com", "A", "192.0.2.1"))


def _ex_delete_mismatch(clients: Clients) -> AwsRequest:
    zone = _zone_with(clients, ("www.example.com", "A", "192.0.2.1"))
    return _batch(zone, _change("DELETE", "www.example.com", "A", "192.0.2.9"))


def _ex_alias_nothing(clients: Clients) -> AwsRequest:
    zone = _zone_with(clients)
    alias = {
        "HostedZoneId": "Z35SXDOTRQ7X7K",
        "DNSName": "gone-1234567890.us-east-1.elb.amazonaws.com",
        "EvaluateTargetHealth": False,
    }
    change = {"Action": "CREATE", "ResourceRecordSet": {"Name": "www.example.com", "Type": "A", "AliasTarget": alias}}
    return _batch(zone, change)


def _ex_cname_apex(clients: Clients) -> AwsRequest:
    return _batch(_zone_with(clients), _change("CREATE", "example.com", "CNAME", "other.example.net"))


def _ex_cname_conflict(clients: Clients) -> AwsRequest:
    zone = _zone_with(clients, ("www.example.com", "A", "192.0.2.1"))
    return _batch(zone, _change("CREATE", "www.example.com", "CNAME", "other.example.net"))


def _ex_outside(clients: Clients) -> AwsRequest:
    return _batch(_zone_with(clients), _change("CREATE", "www.example.org", "A", "192.0.2.1"))


def _ex_a_value(clients: Clients) -> AwsRequest:
    return _batch(_zone_with(clients), _change("CREATE", "www.example.com", "A", "web.example.net"))


def _ex_twice(clients: Clients) -> AwsRequest:
    change = _change("UPSERT", "www.example.com", "A", "192.0.2.1")
    return _batch(_zone_with(clients), change, change)


def _rule(rid: str, summary: str, source: str, check: Any, example: Any) -> Rule:
    return make_rule("route53", rid, _OP, summary, source, check, "InvalidChangeBatch", example)


RULES = (
    _rule("create-existing-record", "A CREATE of a record (name and type) that exists is refused", _API,
          _create_exists, _ex_create_exists),
    _rule("delete-missing-record", "A DELETE of a record that does not exist is refused", _API, _delete_mismatch,
          _ex_delete_missing),
    _rule("delete-mismatched-record", "A DELETE must give the record's current TTL and values", _API,
          _delete_mismatch, _ex_delete_mismatch),
    _rule("alias-to-nothing", "An alias to a load balancer or record that does not exist is refused", _ALIAS,
          _alias_nothing, _ex_alias_nothing),
    _rule("cname-at-apex", "A CNAME is not permitted at the zone apex", _CNAME, _cname_apex, _ex_cname_apex),
    _rule("cname-beside-other-records", "A CNAME cannot share its name with records of other types", _CNAME,
          _cname_conflict, _ex_cname_conflict),
    _rule("name-outside-zone", "A record's name must lie within the zone", _API, _outside_zone, _ex_outside),
    _rule("a-value-not-an-address", "A and AAAA values must be IPv4 and IPv6 addresses", _API, _a_values,
          _ex_a_value),
    _rule("same-record-twice", "A batch may change one record (name, type, set id) only once", _API, _twice,
          _ex_twice),
)  # fmt: skip
