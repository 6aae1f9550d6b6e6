"""Networks (custom mode), subnetworks (CIDR checked, no overlap in a network), routers with Cloud NAT,
firewalls."""

from __future__ import annotations

import ipaddress

from vmplane.sandbox.gcp.compute import Call, Kind, Resolve, handler, register
from vmplane.sandbox.gcp.errors import bad_request, invalid
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, check_name, fingerprint


def _network_prepare(call: Call, r: Resource) -> None:
    if r.get("autoCreateSubnetworks", True) is not False or "IPv4Range" in r:
        raise bad_request(
            "the sandbox emulates custom-mode networks only: set autoCreateSubnetworks to false "
            "(it does not invent auto-mode subnetworks)"
        )
    r.setdefault("routingConfig", {"routingMode": "REGIONAL"})
    r.setdefault("mtu", 1460)
    r.setdefault("networkFirewallPolicyEnforcementOrder", "AFTER_CLASSIC_FIREWALL")
    r.setdefault("subnetworks", [])


def _subnet_refs(r: Resource, ref: Resolve) -> None:
    r["network"] = ref("resource.network", r.get("network"), ("networks",))


def _subnet_prepare(call: Call, r: Resource) -> None:
    if not r.get("network"):
        raise invalid("Invalid value for field 'resource.network': ''. The network is required.")
    cidr = r.get("ipCidrRange", "")
    try:
        net = ipaddress.IPv4Network(cidr, strict=True)
    except ValueError:
        raise invalid(f"Invalid value for field 'resource.ipCidrRange': '{cidr}'. Invalid IPCidrRange.") from None
    if net.prefixlen > 29:
        raise invalid(f"Invalid value for field 'resource.ipCidrRange': '{cidr}'. The prefix must be /29 or larger.")
    for other in call.project.compute.values():
        same = other.get("kind") == "compute#subnetwork" and other.get("network") == r["network"]
        if same and other is not r and net.overlaps(ipaddress.IPv4Network(other["ipCidrRange"])):
            region = other["region"].rsplit("/", 1)[1]
            raise invalid(
                f"Invalid IPCidrRange: {cidr} conflicts with existing subnetwork '{other['name']}' "
                f"in region '{region}'."
            )
    r.setdefault("gatewayAddress", str(net.network_address + 1))
    r["fingerprint"] = fingerprint()
    r.setdefault("privateIpGoogleAccess", False)
    r.setdefault("stackType", "IPV4_ONLY")
    r.setdefault("purpose", "PRIVATE")
    r.setdefault("_next_ip", int(net.network_address) + 2)  # .0 is the network, .1 the gateway (Google reserves both)


def _subnet_created(call: Call, r: Resource) -> None:
    network = call.project.compute[r["network"].split(f"/projects/{call.project.id}/", 1)[1]]
    network["subnetworks"].append(r["selfLink"])


def _subnet_deleting(call: Call, r: Resource) -> None:
    key = r["network"].split(f"/projects/{call.project.id}/", 1)[1]
    network = call.project.compute.get(key)
    if network:
        network["subnetworks"] = [s for s in network["subnetworks"] if s != r["selfLink"]]


def allocate_ip(subnet: Resource) -> str:
    net = ipaddress.IPv4Network(subnet["ipCidrRange"])
    nxt = int(subnet["_next_ip"])
    if nxt >= int(net.broadcast_address) - 1:  # Google keeps the last two addresses too
        raise invalid(f"IP space of 'subnetwork {subnet['name']}' is exhausted.")
    subnet["_next_ip"] = nxt + 1
    return str(ipaddress.IPv4Address(nxt))


def _router_refs(r: Resource, ref: Resolve) -> None:
    r["network"] = ref("resource.network", r.get("network"), ("networks",))
    for i, nat in enumerate(r.get("nats", [])):
        for j, sub in enumerate(nat.get("subnetworks", [])):
            sub["name"] = ref(f"resource.nats[{i}].subnetworks[{j}].name", sub.get("name"), ("subnetworks",))


def _router_prepare(call: Call, r: Resource) -> None:
    if not r.get("network"):
        raise invalid("Invalid value for field 'resource.network': ''. The network is required.")
    for i, nat in enumerate(r.get("nats", [])):
        check_name(nat.get("name"), f"resource.nats[{i}].name")
        if "natIpAllocateOption" not in nat or "sourceSubnetworkIpRangesToNat" not in nat:
            raise invalid(
                f"Invalid value for field 'resource.nats[{i}]': natIpAllocateOption and "
                "sourceSubnetworkIpRangesToNat are required."
            )


def _firewall_refs(r: Resource, ref: Resolve) -> None:
    r["network"] = ref("resource.network", r.get("network") or "global/networks/default", ("networks",))


def _firewall_prepare(call: Call, r: Resource) -> None:
    if bool(r.get("allowed")) == bool(r.get("denied")):
        raise invalid("Invalid value for field 'resource': exactly one of 'allowed' or 'denied' must be set.")
    for field in ("sourceRanges", "destinationRanges"):
        for i, cidr in enumerate(r.get(field, [])):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise invalid(
                    f"Invalid value for field 'resource.{field}[{i}]': '{cidr}'. Invalid IPCidrRange."
                ) from None
    r.setdefault("direction", "INGRESS")
    r.setdefault("priority", 1000)
    r.setdefault("disabled", False)
    r.setdefault("logConfig", {"enable": False})
    if r["direction"] == "INGRESS" and not r.get("sourceRanges") and not r.get("sourceTags"):
        r["sourceRanges"] = ["0.0.0.0/0"]


register(
    "networks", Kind("networks", "Network", "network", prepare=_network_prepare), ("insert", "get", "list", "delete")
)
register(
    "subnetworks",
    Kind(
        "subnetworks",
        "Subnetwork",
        "subnetwork",
        refs=_subnet_refs,
        prepare=_subnet_prepare,
        created=_subnet_created,
        deleting=_subnet_deleting,
    ),
    ("insert", "get", "list", "delete", "patch"),
)
register(
    "routers",
    Kind("routers", "Router", "router", refs=_router_refs, prepare=_router_prepare),
    ("insert", "get", "list", "delete", "patch", "update"),
)
register(
    "firewalls",
    Kind("firewalls", "Firewall", "firewall", refs=_firewall_refs, prepare=_firewall_prepare),
    ("insert", "get", "list", "delete", "patch", "update"),
)


@handler("compute.subnetworks.setPrivateIpGoogleAccess")
def _private_google_access(call: Call) -> Resource:
    r = call.get()
    body = require_body(call.body)
    r["privateIpGoogleAccess"] = bool(body.get("privateIpGoogleAccess"))
    r["fingerprint"] = fingerprint()
    return call.operation("setPrivateIpGoogleAccess", r)
