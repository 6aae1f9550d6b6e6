"""Rules on networks, subnetworks, firewalls, routers and an instance's interfaces, tags and metadata."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.rules import bad, body, rule
from vmplane.sandbox.gcp.rules.examples import REGION, firewall, net, post, sub, vm

_REF = "https://cloud.google.com/compute/docs/reference/rest/v1/"
_FIREWALL = _REF + "firewalls"
_PORT = re.compile(r"(\d+)(?:-(\d+))?")
_PORTED = {"tcp", "udp", "sctp", "6", "17", "132"}
_PROTOCOLS = {"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"}
_TAG = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_META_KEY = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_FW = ("compute.firewalls.insert", "compute.firewalls.patch", "compute.firewalls.update")
_VM = ("compute.instances.insert", "compute.instanceTemplates.insert", "compute.regionInstanceTemplates.insert")


def _mtu(call: Call) -> None:
    mtu = body(call).get("mtu")
    if mtu is not None and not 1300 <= int(mtu) <= 8896:
        raise bad("resource.mtu", mtu, "The MTU must be between 1300 and 8896.")


def _priority(call: Call) -> None:
    priority = body(call).get("priority")
    if priority is not None and not 0 <= int(priority) <= 65535:
        raise bad("resource.priority", priority, "Must be between 0 and 65535.")


def _rules_of(call: Call) -> list[tuple[str, dict[str, Any]]]:
    given = body(call)
    return [
        (f"resource.{kind}[{i}]", r)
        for kind in ("allowed", "denied")
        for i, r in enumerate(given.get(kind) or [])
        if isinstance(r, dict)
    ]


def _protocol(call: Call) -> None:
    for where, r in _rules_of(call):
        proto = str(r.get("IPProtocol", "")).lower()
        if proto not in _PROTOCOLS and not (proto.isdigit() and 0 <= int(proto) <= 255):
            raise bad(f"{where}.IPProtocol", r.get("IPProtocol"), "Invalid IP protocol.")


def _ports(call: Call) -> None:
    for where, r in _rules_of(call):
        for j, port in enumerate(r.get("ports") or []):
            found = _PORT.fullmatch(str(port))
            low, high = (int(found.group(1)), int(found.group(2) or found.group(1))) if found else (1, 0)
            if not (0 <= low <= high <= 65535):
                raise bad(f"{where}.ports[{j}]", port, "Invalid port or port range.")


def _ports_protocol(call: Call) -> None:
    for where, r in _rules_of(call):
        if r.get("ports") and str(r.get("IPProtocol", "")).lower() not in _PORTED:
            raise bad(f"{where}.ports", r["ports"], "Ports can only be specified for TCP, UDP or SCTP.")


def _egress_source_tags(call: Call) -> None:
    given = body(call)
    if given.get("direction") == "EGRESS" and (given.get("sourceTags") or given.get("sourceServiceAccounts")):
        raise bad("resource.sourceTags", given.get("sourceTags"), "Source tags cannot be used for EGRESS traffic.")


def _targets_exclusive(call: Call) -> None:
    given = body(call)
    if given.get("targetServiceAccounts") and (given.get("targetTags") or given.get("sourceTags")):
        raise bad(
            "resource.targetServiceAccounts",
            given["targetServiceAccounts"],
            "targetServiceAccounts cannot be used at the same time as targetTags or sourceTags.",
        )


def _firewall_tags(call: Call) -> None:
    given = body(call)
    for name in ("sourceTags", "targetTags"):
        for i, tag in enumerate(given.get(name) or []):
            if not _TAG.fullmatch(str(tag)):
                raise bad(f"resource.{name}[{i}]", tag, "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")


def _props(call: Call) -> tuple[str, dict[str, Any]]:
    if call.method.id == "compute.instances.insert":
        return "resource", body(call)
    props = body(call).get("properties")
    return "resource.properties", props if isinstance(props, dict) else {}


def _instance_tags(call: Call) -> None:
    where, props = _props(call)
    for i, tag in enumerate((props.get("tags") or {}).get("items") or []):
        if not _TAG.fullmatch(str(tag)):
            raise bad(f"{where}.tags.items[{i}]", tag, "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")


def _metadata_items(call: Call) -> tuple[str, list[Any]]:
    if call.method.id == "compute.instances.setMetadata":
        return "metadata", list(body(call).get("items") or [])
    where, props = _props(call)
    return f"{where}.metadata", list((props.get("metadata") or {}).get("items") or [])


def _metadata_keys(call: Call) -> None:
    where, items = _metadata_items(call)
    seen: set[str] = set()
    for i, item in enumerate(items):
        key = str(item.get("key", "")) if isinstance(item, dict) else ""
        if not _META_KEY.fullmatch(key):
            raise bad(f"{where}.items[{i}].key", key, "Keys must match [a-zA-Z0-9-_]+ and be at most 128 bytes.")
        if key in seen:
            raise bad(f"{where}.items[{i}].key", key, "Duplicate metadata key.")
        seen.add(key)


def _metadata_size(call: Call) -> None:
    where, items = _metadata_items(call)
    total = 0
    for i, item in enumerate(items):
        value = str(item.get("value", "")) if isinstance(item, dict) else ""
        size = len(value.encode())
        if size > 256 * 1024:
            raise bad(f"{where}.items[{i}].value", value[:20] + "...", "A metadata value is limited to 256 KB.")
        total += size + len(str(item.get("key", "")).encode())
    if total > 512 * 1024:
        raise bad(where, "", "The total size of all metadata entries is limited to 512 KB.")


def _one_access_config(call: Call) -> None:
    where, props = _props(call)
    for i, nic in enumerate(props.get("networkInterfaces") or []):
        if isinstance(nic, dict) and len(nic.get("accessConfigs") or []) > 1:
            raise bad(f"{where}.networkInterfaces[{i}].accessConfigs", json.dumps(nic["accessConfigs"]), "At most one.")


def _nat_manual(call: Call) -> None:
    for i, nat in enumerate(body(call).get("nats") or []):
        if isinstance(nat, dict) and nat.get("natIpAllocateOption") == "MANUAL_ONLY" and not nat.get("natIps"):
            raise bad(f"resource.nats[{i}].natIps", "", "MANUAL_ONLY needs at least one natIps address.")


def _nat_subnets(call: Call) -> None:
    for i, nat in enumerate(body(call).get("nats") or []):
        listed = isinstance(nat, dict) and nat.get("sourceSubnetworkIpRangesToNat") == "LIST_OF_SUBNETWORKS"
        if listed and not nat.get("subnetworks"):
            raise bad(f"resource.nats[{i}].subnetworks", "", "LIST_OF_SUBNETWORKS needs the subnetworks listed.")


def _router_asn(call: Call) -> None:
    asn = (body(call).get("bgp") or {}).get("asn")
    if asn is not None and not (64512 <= int(asn) <= 65534 or 4200000000 <= int(asn) <= 4294967294):
        raise bad("resource.bgp.asn", asn, "The ASN must be a private ASN (RFC 6996).")


def _secondary_overlap(call: Call) -> None:
    given = body(call)
    try:
        ranges = [("resource.ipCidrRange", ipaddress.ip_network(str(given.get("ipCidrRange")), strict=False))]
    except ValueError:
        return  # the handler says why the primary range is invalid
    for i, second in enumerate(given.get("secondaryIpRanges") or []):
        where = f"resource.secondaryIpRanges[{i}].ipCidrRange"
        try:
            cidr = ipaddress.ip_network(str(second.get("ipCidrRange")), strict=True)
        except ValueError:
            raise bad(where, second.get("ipCidrRange"), "Invalid IPCidrRange.") from None
        for other_where, other in ranges:
            if cidr.overlaps(other):
                raise bad(where, str(cidr), f"The range overlaps the range of '{other_where}'.")
        ranges.append((where, cidr))


def _fw(**extra: Any) -> tuple[Any, ...]:
    return (net(), firewall(**extra))


ROUTER = f"/regions/{REGION}/routers"

for _id, _methods, _summary, _source, _example, _check in (
    (
        "compute.network-mtu-range",
        ("compute.networks.insert", "compute.networks.patch"),
        "a network MTU outside 1300..8896",
        _REF + "networks",
        (net(mtu=9000),),
        _mtu,
    ),
    (
        "compute.firewall-priority-range",
        _FW,
        "a firewall priority outside 0..65535",
        _FIREWALL,
        _fw(priority=70000),
        _priority,
    ),
    (
        "compute.firewall-protocol",
        _FW,
        "an IP protocol that is neither a known name nor a number 0..255",
        _FIREWALL,
        _fw(allowed=[{"IPProtocol": "http"}]),
        _protocol,
    ),
    (
        "compute.firewall-port-format",
        _FW,
        "a malformed port or port range (`80-`, `90-80`, above 65535)",
        _FIREWALL,
        _fw(allowed=[{"IPProtocol": "tcp", "ports": ["8080-80"]}]),
        _ports,
    ),
    (
        "compute.firewall-ports-protocol",
        _FW,
        "ports on a protocol other than TCP, UDP or SCTP",
        _FIREWALL,
        _fw(allowed=[{"IPProtocol": "icmp", "ports": ["22"]}]),
        _ports_protocol,
    ),
    (
        "compute.firewall-egress-source-tags",
        _FW,
        "source tags (or source service accounts) on an EGRESS rule",
        _FIREWALL,
        _fw(direction="EGRESS", sourceTags=["web"], destinationRanges=["0.0.0.0/0"]),
        _egress_source_tags,
    ),
    (
        "compute.firewall-target-accounts-exclusive",
        _FW,
        "target service accounts together with target or source tags",
        _FIREWALL,
        _fw(targetTags=["web"], targetServiceAccounts=["a@p.iam.gserviceaccount.com"]),
        _targets_exclusive,
    ),
    (
        "compute.firewall-tag-format",
        _FW,
        "a source or target tag that is not an RFC 1035 name",
        _FIREWALL,
        _fw(targetTags=["Web_Servers"]),
        _firewall_tags,
    ),
    (
        "compute.instance-tag-format",
        _VM,
        "an instance network tag that is not an RFC 1035 name",
        _REF + "instances",
        (net(), sub(), vm(tags={"items": ["Web Tier"]})),
        _instance_tags,
    ),
    (
        "compute.metadata-key",
        (*_VM, "compute.instances.setMetadata"),
        "a metadata key outside [a-zA-Z0-9-_]{1,128}, or the same key twice",
        _REF + "instances",
        (net(), sub(), vm(metadata={"items": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]})),
        _metadata_keys,
    ),
    (
        "compute.metadata-size",
        (*_VM, "compute.instances.setMetadata"),
        "a metadata value over 256 KB, or all of them over 512 KB",
        "https://cloud.google.com/compute/docs/metadata/setting-custom-metadata#limitations",
        (net(), sub(), vm(metadata={"items": [{"key": "startup-script", "value": "x" * (300 * 1024)}]})),
        _metadata_size,
    ),
    (
        "compute.one-access-config",
        _VM,
        "more than one access config on a network interface",
        _REF + "instances",
        (
            net(),
            sub(),
            vm(
                networkInterfaces=[
                    {
                        "subnetwork": f"regions/{REGION}/subnetworks/s1",
                        "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}, {"type": "ONE_TO_ONE_NAT"}],
                    }
                ]
            ),
        ),
        _one_access_config,
    ),
    (
        "compute.nat-manual-needs-ips",
        ("compute.routers.insert", "compute.routers.patch", "compute.routers.update"),
        "a Cloud NAT with `MANUAL_ONLY` addresses and no `natIps`",
        _REF + "routers",
        (
            net(),
            post(
                ROUTER,
                {
                    "name": "r1",
                    "network": "global/networks/n1",
                    "nats": [
                        {
                            "name": "nat",
                            "natIpAllocateOption": "MANUAL_ONLY",
                            "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES",
                        }
                    ],
                },
            ),
        ),
        _nat_manual,
    ),
    (
        "compute.nat-listed-subnets",
        ("compute.routers.insert", "compute.routers.patch", "compute.routers.update"),
        "a Cloud NAT for `LIST_OF_SUBNETWORKS` that lists none",
        _REF + "routers",
        (
            net(),
            post(
                ROUTER,
                {
                    "name": "r1",
                    "network": "global/networks/n1",
                    "nats": [
                        {
                            "name": "nat",
                            "natIpAllocateOption": "AUTO_ONLY",
                            "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
                        }
                    ],
                },
            ),
        ),
        _nat_subnets,
    ),
    (
        "compute.router-private-asn",
        ("compute.routers.insert", "compute.routers.patch", "compute.routers.update"),
        "a Cloud Router ASN that is not a private (RFC 6996) ASN",
        _REF + "routers",
        (net(), post(ROUTER, {"name": "r1", "network": "global/networks/n1", "bgp": {"asn": 15169}})),
        _router_asn,
    ),
    (
        "compute.subnet-secondary-overlap",
        ("compute.subnetworks.insert",),
        "a secondary range that overlaps the primary range or another secondary range",
        _REF + "subnetworks",
        (net(), sub(secondaryIpRanges=[{"rangeName": "pods", "ipCidrRange": "10.0.0.0/25"}])),
        _secondary_overlap,
    ),
):
    rule(_id, _methods, _summary, _source, "400 invalid", "200", _example, _check)
