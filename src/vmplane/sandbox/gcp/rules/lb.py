"""Rules on the load balancer chain: health checks, backend services, URL maps, certificates, proxies and
forwarding rules."""

from __future__ import annotations

import re
from typing import Any

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.rules import bad, body, rule
from vmplane.sandbox.gcp.rules.examples import LB, bs, cert, group, hc, https_proxy, net, rule_, sub
from vmplane.sandbox.gcp.rules.examples import urlmap as url_map
from vmplane.sandbox.gcp.store import parse_ref

_REF = "https://cloud.google.com/compute/docs/reference/rest/v1/"
_HC_DOC = "https://cloud.google.com/load-balancing/docs/health-check-concepts"
_HC = ("compute.healthChecks.insert", "compute.healthChecks.patch", "compute.healthChecks.update")
_BS = ("compute.backendServices.insert", "compute.backendServices.patch", "compute.backendServices.update")
_UM = ("compute.urlMaps.insert", "compute.urlMaps.patch", "compute.urlMaps.update")
_FR = ("compute.globalForwardingRules.insert",)
_PORT_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
MAX_DOMAINS = 100
MAX_PROXY_CERTS = 15


def _hc_interval(call: Call) -> None:
    given = body(call).get("checkIntervalSec")
    if given is not None and not 1 <= int(given) <= 300:
        raise bad("resource.checkIntervalSec", given, "Must be between 1 and 300 seconds.")


def _hc_thresholds(call: Call) -> None:
    for name in ("healthyThreshold", "unhealthyThreshold"):
        given = body(call).get(name)
        if given is not None and not 1 <= int(given) <= 10:
            raise bad(f"resource.{name}", given, "Must be between 1 and 10.")


def _hc_checks(call: Call) -> list[tuple[str, dict[str, Any]]]:
    given = body(call)
    names = ("httpHealthCheck", "httpsHealthCheck", "http2HealthCheck", "tcpHealthCheck", "sslHealthCheck")
    return [(f"resource.{n}", given[n]) for n in names if isinstance(given.get(n), dict)]


def _hc_port(call: Call) -> None:
    for where, spec in _hc_checks(call):
        port = spec.get("port")
        if port is not None and not 1 <= int(port) <= 65535:
            raise bad(f"{where}.port", port, "Valid values are 1 through 65535.")


def _hc_path(call: Call) -> None:
    for where, spec in _hc_checks(call):
        path = spec.get("requestPath")
        if path is not None and not str(path).startswith("/"):
            raise bad(f"{where}.requestPath", path, "The request path must start with '/'.")


def _bs_one_hc(call: Call) -> None:
    checks = body(call).get("healthChecks") or []
    if len(checks) > 1:
        raise bad("resource.healthChecks", ", ".join(map(str, checks)), "At most one health check can be specified.")


def _bs_timeout(call: Call) -> None:
    given = body(call).get("timeoutSec")
    if given is not None and int(given) < 1:
        raise bad("resource.timeoutSec", given, "Must be between 1 and 2147483647.")


def _bs_draining(call: Call) -> None:
    given = (body(call).get("connectionDraining") or {}).get("drainingTimeoutSec")
    if given is not None and not 0 <= int(given) <= 3600:
        raise bad("resource.connectionDraining.drainingTimeoutSec", given, "Must be between 0 and 3600.")


def _bs_backends(call: Call) -> None:
    seen: set[str] = set()
    for i, backend in enumerate(body(call).get("backends") or []):
        where = f"resource.backends[{i}]"
        scaler, utilization = backend.get("capacityScaler"), backend.get("maxUtilization")
        if scaler is not None and not (float(scaler) == 0 or 0.1 <= float(scaler) <= 1):
            raise bad(f"{where}.capacityScaler", scaler, "Valid range is 0.0 and [0.1, 1.0].")
        if utilization is not None and not 0 <= float(utilization) <= 1:
            raise bad(f"{where}.maxUtilization", utilization, "Valid range is [0.0, 1.0].")
        group = str(backend.get("group", ""))
        key = parse_ref(group, call.project.id, f"{where}.group")[1] if group else ""
        if key and key in seen:
            raise bad(f"{where}.group", group, "Duplicate backend group.")
        seen.add(key)


def _um_exclusive(call: Call) -> None:
    given = body(call)
    if given.get("defaultService") and given.get("defaultUrlRedirect"):
        raise bad("resource.defaultUrlRedirect", "", "defaultService and defaultUrlRedirect cannot both be set.")


def _um_matchers(call: Call) -> None:
    given = body(call)
    names = {m.get("name") for m in given.get("pathMatchers") or [] if isinstance(m, dict)}
    for i, host in enumerate(given.get("hostRules") or []):
        if host.get("pathMatcher") not in names:
            raise bad(f"resource.hostRules[{i}].pathMatcher", host.get("pathMatcher"), "No such path matcher.")


def _domains(call: Call) -> list[str]:
    given = body(call)
    return [str(d) for d in (given.get("managed") or {}).get("domains") or []] if given.get("type") == "MANAGED" else []


def _cert_wildcard(call: Call) -> None:
    for i, domain in enumerate(_domains(call)):
        if "*" in domain:
            raise bad(f"resource.managed.domains[{i}]", domain, "Wildcard domains not supported.")


def _cert_count(call: Call) -> None:
    domains = _domains(call)
    if len(domains) > MAX_DOMAINS:
        raise bad("resource.managed.domains", len(domains), f"At most {MAX_DOMAINS} domains are supported.")


def _proxy_certs(call: Call) -> None:
    certs = body(call).get("sslCertificates") or []
    if len(certs) > MAX_PROXY_CERTS:
        raise bad("resource.sslCertificates", len(certs), f"At most {MAX_PROXY_CERTS} SSL certificates.")


def _ports(value: Any) -> tuple[int, int] | None:
    found = _PORT_RANGE.fullmatch(str(value))
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or found.group(1))


def _fr_format(call: Call) -> None:
    given = body(call).get("portRange")
    if given is None:
        return
    ports = _ports(given)
    if ports is None or not 1 <= ports[0] <= ports[1] <= 65535:
        raise bad("resource.portRange", given, "Must be a match of regex '\\d+(?:-\\d+)?' within 1..65535.")


def _fr_proxy_single_port(call: Call) -> None:
    given = body(call)
    ports = _ports(given.get("portRange", ""))
    target = str(given.get("target", ""))
    if ports and ports[0] != ports[1] and ("targetHttpProxies" in target or "targetHttpsProxies" in target):
        raise bad("resource.portRange", given["portRange"], "A target HTTP(S) proxy takes a single port.")


def _fr_tcp(call: Call) -> None:
    given = body(call)
    target = str(given.get("target", ""))
    if "Proxies" in target and str(given.get("IPProtocol", "TCP")) != "TCP":
        raise bad("resource.IPProtocol", given["IPProtocol"], "A target proxy's forwarding rule must be TCP.")


_CHAIN = (net(), sub(), hc())

for _id, _methods, _summary, _source, _example, _check in (
    (
        "compute.hc-interval-range",
        _HC,
        "a health check interval outside 1..300 s",
        _HC_DOC,
        (hc(checkIntervalSec=301, timeoutSec=5),),
        _hc_interval,
    ),
    (
        "compute.hc-threshold-range",
        _HC,
        "a healthy or unhealthy threshold outside 1..10",
        _HC_DOC,
        (hc(unhealthyThreshold=11),),
        _hc_thresholds,
    ),
    (
        "compute.hc-port-range",
        _HC,
        "a health check port outside 1..65535",
        _REF + "healthChecks",
        (hc(httpHealthCheck={"port": 70000}),),
        _hc_port,
    ),
    (
        "compute.hc-request-path",
        _HC,
        "an HTTP health check request path that does not start with `/`",
        _REF + "healthChecks",
        (hc(httpHealthCheck={"port": 80, "requestPath": "healthz"}),),
        _hc_path,
    ),
    (
        "compute.bs-one-health-check",
        _BS,
        "a backend service with more than one health check",
        _REF + "backendServices",
        (*_CHAIN, hc("h2"), bs(healthChecks=["global/healthChecks/h1", "global/healthChecks/h2"])),
        _bs_one_hc,
    ),
    (
        "compute.bs-timeout-range",
        _BS,
        "a backend service timeout below 1 s",
        _REF + "backendServices",
        (*_CHAIN, bs(timeoutSec=0)),
        _bs_timeout,
    ),
    (
        "compute.bs-draining-range",
        _BS,
        "a connection draining timeout outside 0..3600 s",
        "https://cloud.google.com/load-balancing/docs/enabling-connection-draining",
        (*_CHAIN, bs(connectionDraining={"drainingTimeoutSec": 7200})),
        _bs_draining,
    ),
    (
        "compute.bs-backend-values",
        _BS,
        "a backend's capacityScaler outside 0 or 0.1..1, maxUtilization outside 0..1, or the same group twice",
        _REF + "backendServices",
        (*_CHAIN, group(), bs(backends=[{"group": "zones/us-central1-a/instanceGroups/g1", "capacityScaler": 1.5}])),
        _bs_backends,
    ),
    (
        "compute.urlmap-service-or-redirect",
        _UM,
        "a URL map with both a default service and a default redirect",
        _REF + "urlMaps",
        (*_CHAIN, bs(), url_map(defaultUrlRedirect={"httpsRedirect": True})),
        _um_exclusive,
    ),
    (
        "compute.urlmap-host-rule-matcher",
        _UM,
        "a host rule naming a path matcher the URL map does not have",
        _REF + "urlMaps",
        (*_CHAIN, bs(), url_map(hostRules=[{"hosts": ["a.example.com"], "pathMatcher": "missing"}])),
        _um_matchers,
    ),
    (
        "compute.cert-managed-wildcard",
        ("compute.sslCertificates.insert",),
        "a wildcard domain on a Google-managed certificate",
        "https://github.com/GoogleCloudPlatform/k8s-config-connector/issues/107",
        (cert(domains=("*.sandbox.vmplane.test",)),),
        _cert_wildcard,
    ),
    (
        "compute.cert-managed-100-domains",
        ("compute.sslCertificates.insert",),
        f"more than {MAX_DOMAINS} domains on a Google-managed certificate",
        "https://github.com/GoogleCloudPlatform/magic-modules/pull/2834",
        (cert(domains=tuple(f"d{i}.sandbox.vmplane.test" for i in range(101))),),
        _cert_count,
    ),
    (
        "compute.proxy-15-certificates",
        ("compute.targetHttpsProxies.insert", "compute.targetHttpsProxies.setSslCertificates"),
        f"more than {MAX_PROXY_CERTS} certificates on a target HTTPS proxy",
        _REF + "targetHttpsProxies",
        (*_CHAIN, bs(), url_map(), cert(), https_proxy(certs=16)),
        _proxy_certs,
    ),
    (
        "compute.fr-port-range-format",
        _FR,
        "a malformed forwarding rule portRange (`80-`, `90-80`, `0`, above 65535)",
        _REF + "globalForwardingRules",
        (*LB, rule_(port="80-")),
        _fr_format,
    ),
    (
        "compute.fr-proxy-single-port",
        _FR,
        "a port range of more than one port on a target HTTP(S) proxy's forwarding rule",
        "https://cloud.google.com/load-balancing/docs/forwarding-rule-concepts#port_specifications",
        (*LB, rule_(port="80-81")),
        _fr_proxy_single_port,
    ),
    (
        "compute.fr-proxy-tcp",
        _FR,
        "a target proxy's forwarding rule on a protocol other than TCP",
        _REF + "globalForwardingRules",
        (*LB, rule_(IPProtocol="UDP")),
        _fr_tcp,
    ),
):
    rule(_id, _methods, _summary, _source, "400 invalid", "200", _example, _check)
