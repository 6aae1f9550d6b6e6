"""The global external HTTPS load balancer chain: health check -> backend service -> URL map ->
(managed) SSL certificate -> target HTTPS/HTTP proxy -> global address -> global forwarding rule.

A managed certificate stays PROVISIONING: Google activates it only once DNS points at the load balancer,
which the sandbox cannot know; a test says so with POST /_sandbox/certificates/activate.
Addresses come from 203.0.113.0/24 (a documentation range), RESERVED until a forwarding rule uses one.
"""

from __future__ import annotations

import ipaddress

from vmplane.sandbox.gcp.compute import (
    Call,
    Kind,
    Resolve,
    handler,
    key_of,
    register,
    resolver,
    set_labels,
)
from vmplane.sandbox.gcp.errors import invalid
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, check_labels, fingerprint, now

_ALL = ("insert", "get", "list", "delete")


def _hc_prepare(call: Call, r: Resource) -> None:
    kind = r.setdefault("type", "HTTP")
    field = {"HTTP": "httpHealthCheck", "HTTPS": "httpsHealthCheck", "TCP": "tcpHealthCheck"}.get(kind)
    if field:
        r.setdefault(field, {}).setdefault("port", {"HTTP": 80, "HTTPS": 443}.get(kind, 80))
        if kind != "TCP":
            r[field].setdefault("requestPath", "/")
    for name, default in (
        ("checkIntervalSec", 5),
        ("timeoutSec", 5),
        ("healthyThreshold", 2),
        ("unhealthyThreshold", 2),
    ):
        r.setdefault(name, default)
    if r["timeoutSec"] > r["checkIntervalSec"]:
        raise invalid("Invalid value for field 'resource.timeoutSec': must not be greater than checkIntervalSec.")


def _bs_refs(r: Resource, ref: Resolve) -> None:
    r["healthChecks"] = [
        ref(f"resource.healthChecks[{i}]", h, ("healthChecks",)) for i, h in enumerate(r.get("healthChecks", []))
    ]
    for i, backend in enumerate(r.get("backends", [])):
        backend["group"] = ref(f"resource.backends[{i}].group", backend.get("group"), ("instanceGroups",))


def _bs_prepare(call: Call, r: Resource) -> None:
    r.setdefault("protocol", "HTTP")
    r.setdefault("port", 80)
    r.setdefault("portName", "http")
    r.setdefault("timeoutSec", 30)
    r.setdefault("loadBalancingScheme", "EXTERNAL")
    r.setdefault("connectionDraining", {"drainingTimeoutSec": 300})
    r["fingerprint"] = fingerprint()
    for backend in r.get("backends", []):
        backend.setdefault("balancingMode", "UTILIZATION")
        backend.setdefault("capacityScaler", 1)


def _urlmap_refs(r: Resource, ref: Resolve) -> None:
    r["defaultService"] = ref("resource.defaultService", r.get("defaultService"), ("backendServices",))
    if r["defaultService"] is None:
        r.pop("defaultService")
    for i, matcher in enumerate(r.get("pathMatchers", [])):
        if matcher.get("defaultService"):
            where = f"resource.pathMatchers[{i}].defaultService"
            matcher["defaultService"] = ref(where, matcher["defaultService"], ("backendServices",))


def _urlmap_prepare(call: Call, r: Resource) -> None:
    if not r.get("defaultService") and not r.get("defaultUrlRedirect"):
        raise invalid("Invalid value for field 'resource': a defaultService or defaultUrlRedirect is required.")
    r["fingerprint"] = fingerprint()


def _cert_prepare(call: Call, r: Resource) -> None:
    kind = r.setdefault("type", "SELF_MANAGED")
    if kind == "MANAGED":
        domains = r.get("managed", {}).get("domains", [])
        if not domains:
            raise invalid("Invalid value for field 'resource.managed.domains': a managed certificate needs domains.")
        r["managed"] = {
            "domains": domains,
            "status": "PROVISIONING",
            "domainStatus": dict.fromkeys(domains, "PROVISIONING"),
        }
        r["subjectAlternativeNames"] = list(domains)
    elif not r.get("certificate") or not r.get("privateKey"):
        raise invalid("Invalid value for field 'resource.certificate': a self-managed certificate needs a key too.")
    else:
        r["_privateKey"] = r.pop("privateKey")  # Google never returns the key


def activate_certificate(cert: Resource) -> None:
    domains = cert.get("managed", {}).get("domains", [])
    cert["managed"].update(status="ACTIVE", domainStatus=dict.fromkeys(domains, "ACTIVE"))
    cert["expireTime"] = now()[:4] + "-12-31T23:59:59.000-08:00"


def _https_refs(r: Resource, ref: Resolve) -> None:
    r["urlMap"] = ref("resource.urlMap", r.get("urlMap"), ("urlMaps",))
    if "sslCertificates" in r:
        certs = r["sslCertificates"]
        r["sslCertificates"] = [
            ref(f"resource.sslCertificates[{i}]", c, ("sslCertificates",)) for i, c in enumerate(certs)
        ]


def _proxy_prepare(call: Call, r: Resource) -> None:
    if not r.get("urlMap"):
        raise invalid("Invalid value for field 'resource.urlMap': ''. A URL map is required.")
    if r["kind"] == "compute#targetHttpsProxy" and not r.get("sslCertificates") and not r.get("certificateMap"):
        raise invalid("Invalid value for field 'resource.sslCertificates': an HTTPS proxy needs a certificate.")
    r["fingerprint"] = fingerprint()


def _address_prepare(call: Call, r: Resource) -> None:
    project = call.project
    if r.get("address"):
        raise invalid("Invalid value for field 'resource.address': the sandbox allocates global addresses itself.")
    if project.next_public_ip > 254:
        raise invalid("Quota 'GLOBAL_ADDRESSES' exceeded in the sandbox (203.0.113.0/24 is used up).")
    r["address"] = f"203.0.113.{project.next_public_ip}"
    project.next_public_ip += 1
    r.update(status="RESERVED", addressType=r.get("addressType", "EXTERNAL"), ipVersion=r.get("ipVersion", "IPV4"))
    r.setdefault("networkTier", "PREMIUM")
    r.setdefault("users", [])


def _rule_refs(r: Resource, ref: Resolve) -> None:
    r["target"] = ref("resource.target", r.get("target"), ("targetHttpsProxies", "targetHttpProxies"))
    given = r.get("IPAddress")
    if given and not _is_ip(given):
        r["_uses"] = [ref("resource.IPAddress", given, ("addresses",))]


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _rule_prepare(call: Call, r: Resource) -> None:
    if not r.get("target"):
        raise invalid("Invalid value for field 'resource.target': ''. A target is required.")
    given = r.get("IPAddress")
    addresses = [a for a in call.project.compute.values() if a.get("kind") == "compute#address"]
    if given and _is_ip(given):
        match = next((a for a in addresses if a["address"] == given and "/global/" in a["selfLink"]), None)
        if match is None:
            raise invalid(
                f"Invalid value for field 'resource.IPAddress': '{given}'. No reserved global address has it."
            )
        r["_uses"] = [match["selfLink"]]
    if not r.get("_uses"):
        raise invalid("Invalid value for field 'resource.IPAddress': the sandbox needs a reserved global address.")
    address = call.project.compute[key_of({"selfLink": r["_uses"][0]})]
    r["IPAddress"] = address["address"]
    port = str(r.get("portRange", ""))
    if not port:
        raise invalid("Invalid value for field 'resource.portRange': ''. A port range is required.")
    r["portRange"] = port if "-" in port else f"{port}-{port}"
    # One address may front several rules (443 and the :80 redirect), never two on the same port.
    for user in address["users"]:
        other = call.project.compute.get(key_of({"selfLink": user}))
        if user != r["selfLink"] and other is not None and other.get("portRange") == r["portRange"]:
            raise invalid(
                f"Invalid value for field 'resource.portRange': '{port}'. The address {address['name']} already "
                f"serves this port range through {other['name']}."
            )
    r.setdefault("IPProtocol", "TCP")
    r.setdefault("loadBalancingScheme", "EXTERNAL")
    r.setdefault("networkTier", "PREMIUM")
    r["fingerprint"] = fingerprint()
    check_labels(r.get("labels"))
    users = [u for u in address["users"] if u != r["selfLink"]]
    address.update(status="IN_USE", users=[*users, r["selfLink"]])


def _rule_deleting(call: Call, r: Resource) -> None:
    for link in r.get("_uses", []):
        address = call.project.compute.get(key_of({"selfLink": link}))
        if address:
            users = [u for u in address["users"] if u != r["selfLink"]]
            address.update(status="IN_USE" if users else "RESERVED", users=users)


register(
    "healthChecks",
    Kind("healthChecks", "HealthCheck", "health check", prepare=_hc_prepare),
    (*_ALL, "patch", "update"),
)
register(
    "backendServices",
    Kind("backendServices", "BackendService", "backend service", _bs_refs, _bs_prepare),
    (*_ALL, "patch", "update"),
)
register("urlMaps", Kind("urlMaps", "UrlMap", "url map", _urlmap_refs, _urlmap_prepare), (*_ALL, "patch", "update"))
register("sslCertificates", Kind("sslCertificates", "SslCertificate", "ssl certificate", prepare=_cert_prepare), _ALL)
register(
    "targetHttpsProxies",
    Kind("targetHttpsProxies", "TargetHttpsProxy", "target https proxy", _https_refs, _proxy_prepare),
    _ALL,
)
register(
    "targetHttpProxies",
    Kind("targetHttpProxies", "TargetHttpProxy", "target http proxy", _https_refs, _proxy_prepare),
    _ALL,
)
register("globalAddresses", Kind("addresses", "Address", "address", prepare=_address_prepare), _ALL)
register(
    "globalForwardingRules",
    Kind("forwardingRules", "ForwardingRule", "forwarding rule", _rule_refs, _rule_prepare, deleting=_rule_deleting),
    _ALL,
)


handler("compute.globalAddresses.setLabels")(set_labels)
handler("compute.globalForwardingRules.setLabels")(set_labels)


def _set_field(call: Call, field: str, value: object, collections: tuple[str, ...]) -> Resource:
    """The `set*` calls of proxies and rules: one reference replaced after it is checked, like an insert's."""
    r = call.get()
    ref = resolver(call)
    if isinstance(value, list):
        r[field] = [ref(f"{field}[{i}]", v, collections) for i, v in enumerate(value)]
    else:
        r[field] = ref(field, value, collections)
    if not r[field]:
        raise invalid(f"Invalid value for field '{field}': ''. It is required.")
    r["fingerprint"] = fingerprint()
    return call.operation(call.method.verb, r)


@handler("compute.targetHttpsProxies.setSslCertificates")
def _set_certs(call: Call) -> Resource:
    body = require_body(call.body)
    return _set_field(call, "sslCertificates", list(body.get("sslCertificates") or []), ("sslCertificates",))


@handler("compute.targetHttpsProxies.setUrlMap")
@handler("compute.targetHttpProxies.setUrlMap")
def _set_url_map(call: Call) -> Resource:
    return _set_field(call, "urlMap", require_body(call.body).get("urlMap"), ("urlMaps",))


@handler("compute.globalForwardingRules.setTarget")
def _set_target(call: Call) -> Resource:
    targets = ("targetHttpsProxies", "targetHttpProxies")
    return _set_field(call, "target", require_body(call.body).get("target"), targets)
