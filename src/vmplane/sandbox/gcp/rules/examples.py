"""Short builders for the catalogue's examples: the requests a rule's example sends, as raw HTTP (Step)."""

from __future__ import annotations

from typing import Any

from vmplane.sandbox.gcp.rules import Step

P = "/compute/v1/projects/{p}"
REGION = "us-central1"
ZONE = "us-central1-a"
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
DNS = "/dns/v1/projects/{p}/managedZones/sandbox-vmplane-test/changes"


def post(path: str, body: Any) -> Step:
    return Step("POST", P + path, body)


def delete(path: str) -> Step:
    return Step("DELETE", P + path)


def get(path: str) -> Step:
    return Step("GET", P + path)


def patch(path: str, body: Any) -> Step:
    return Step("PATCH", P + path, body)


def put(path: str, body: Any) -> Step:
    return Step("PUT", P + path, body)


def net(name: str = "n1", **extra: Any) -> Step:
    return post("/global/networks", {"name": name, "autoCreateSubnetworks": False, **extra})


def sub(name: str = "s1", cidr: str = "10.0.0.0/24", **extra: Any) -> Step:
    body = {"name": name, "network": "global/networks/n1", "ipCidrRange": cidr, **extra}
    return post(f"/regions/{REGION}/subnetworks", body)


def firewall(name: str = "f1", **extra: Any) -> Step:
    body = {"name": name, "network": "global/networks/n1", "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}]}
    return post("/global/firewalls", {**body, **extra})


def boot(**init: Any) -> dict[str, Any]:
    return {"boot": True, "autoDelete": True, "initializeParams": {"sourceImage": IMAGE, **init}}


def vm_body(name: str = "vm1", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "machineType": f"zones/{ZONE}/machineTypes/e2-small",
        "disks": [boot()],
        "networkInterfaces": [{"subnetwork": f"regions/{REGION}/subnetworks/s1"}],
        **extra,
    }


def vm(name: str = "vm1", **extra: Any) -> Step:
    return post(f"/zones/{ZONE}/instances", vm_body(name, **extra))


def template(name: str = "t1", **props: Any) -> Step:
    properties = {
        "machineType": "e2-small",
        "disks": [boot()],
        "networkInterfaces": [{"subnetwork": f"regions/{REGION}/subnetworks/s1"}],
        **props,
    }
    return post("/global/instanceTemplates", {"name": name, "properties": properties})


def group(name: str = "g1") -> Step:
    return post(f"/zones/{ZONE}/instanceGroups", {"name": name, "network": "global/networks/n1"})


def mig(name: str = "m1", **extra: Any) -> Step:
    body = {"name": name, "baseInstanceName": name, "instanceTemplate": "global/instanceTemplates/t1", "targetSize": 0}
    return post(f"/regions/{REGION}/instanceGroupManagers", {**body, **extra})


def hc(name: str = "h1", **extra: Any) -> Step:
    return post("/global/healthChecks", {"name": name, "type": "HTTP", "httpHealthCheck": {"port": 80}, **extra})


def bs(name: str = "b1", **extra: Any) -> Step:
    body = {"name": name, "healthChecks": ["global/healthChecks/h1"], "loadBalancingScheme": "EXTERNAL_MANAGED"}
    return post("/global/backendServices", {**body, **extra})


def urlmap(name: str = "u1", **extra: Any) -> Step:
    return post("/global/urlMaps", {"name": name, "defaultService": "global/backendServices/b1", **extra})


def http_proxy(name: str = "x1") -> Step:
    return post("/global/targetHttpProxies", {"name": name, "urlMap": "global/urlMaps/u1"})


def cert(name: str = "c1", domains: tuple[str, ...] = ("a.sandbox.vmplane.test",)) -> Step:
    return post("/global/sslCertificates", {"name": name, "type": "MANAGED", "managed": {"domains": list(domains)}})


def https_proxy(name: str = "y1", certs: int = 1) -> Step:
    links = ["global/sslCertificates/c1"] * certs
    return post("/global/targetHttpsProxies", {"name": name, "urlMap": "global/urlMaps/u1", "sslCertificates": links})


def address(name: str = "a1") -> Step:
    return post("/global/addresses", {"name": name})


def rule_(name: str = "r1", port: str = "80", **extra: Any) -> Step:
    body = {
        "name": name,
        "IPAddress": "global/addresses/a1",
        "IPProtocol": "TCP",
        "portRange": port,
        "target": "global/targetHttpProxies/x1",
        "loadBalancingScheme": "EXTERNAL_MANAGED",
    }
    return post("/global/forwardingRules", {**body, **extra})


LB = (net(), sub(), hc(), bs(), urlmap(), http_proxy(), address())  # what a forwarding rule needs


def record(kind: str, rrdatas: list[str], name: str = "www.sandbox.vmplane.test.", ttl: int = 300) -> Step:
    rrset = {"name": name, "type": kind, "ttl": ttl, "rrdatas": rrdatas}
    return Step("POST", DNS, {"additions": [rrset]})
