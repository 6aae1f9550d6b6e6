"""The global external Application Load Balancer, in the four LB steps AWS has:

- stepCreateLoadBalancer (`ensure_frontend`): the HTTP health check, the firewall rule for Google's
  health checkers, the global address (its IP is `LoadBalancerDNSName`);
- stepCreateTargetGroup (`ensure_backend`, lb_backend.py): the backend service over the pools' groups;
- stepCreateListener (`ensure_listeners`): URL map, managed certificate, HTTPS proxy and the 443
  forwarding rule (`LoadBalancerID`), and the HTTP->HTTPS redirect (URL map, HTTP proxy, rule on 80)
  on the same address;
- stepCreateDNSRecord (`ensure_dns_record`): the Cloud DNS A record, then the certificate's status.

Every resource has a deterministic name, recorded before it is created, found by name (and checked
as ours by its description) before every insert, and updated in place when the spec moved.
`lb_teardown.detach` removes it all in reverse.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import certs, dns, lb_backend, lb_firewall, naming
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.lb_refs import ensure_global, lb_block, modify, ref, tail
from vmplane.clouds.gcp.ownership import description, labels
from vmplane.clouds.gcp.session import GcpClients

HTTPS_PORT, HTTP_PORT = 443, 80
HEALTH_TIMEOUT_SEC = 5


# ---- stepCreateLoadBalancer ---------------------------------------------------------------------


def ensure_frontend(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    lb, infra, ids, t = lb_block(ctx), ctx.infra, gcp_ids(ctx.infra), ctx.tagger
    spec = ctx.spec
    ids.HealthCheck, ids.Address = naming.health_check(spec), naming.address(spec)
    ctx.save()  # intent: the names teardown looks for
    hc = lb.health_check
    http = compute_v1.HTTPHealthCheck(port=hc.port, request_path=hc.path)
    desired = compute_v1.HealthCheck(
        name=ids.HealthCheck,
        description=description(t, "health-check"),
        type_="HTTP",
        http_health_check=http,
        check_interval_sec=hc.interval_seconds,
        timeout_sec=min(HEALTH_TIMEOUT_SEC, hc.interval_seconds),
        healthy_threshold=hc.healthy_threshold,
        unhealthy_threshold=hc.unhealthy_threshold,
    )
    name = ids.HealthCheck
    where = ("healthChecks", "HealthChecks", "health_check")
    found, created = ensure_global(gcp, ctx, *where, desired)
    now = (found.http_health_check.port, found.http_health_check.request_path, found.check_interval_sec)
    thresholds = (found.healthy_threshold, found.unhealthy_threshold)
    if not created and (
        now != (hc.port, hc.path, hc.interval_seconds) or thresholds != (hc.healthy_threshold, hc.unhealthy_threshold)
    ):
        patch = compute_v1.HealthCheck(
            type_="HTTP",
            http_health_check=http,
            check_interval_sec=desired.check_interval_sec,
            timeout_sec=desired.timeout_sec,
            healthy_threshold=hc.healthy_threshold,
            unhealthy_threshold=hc.unhealthy_threshold,
        )
        modify(gcp, *where, name, "patch", health_check_resource=patch)
    lb_firewall.ensure_health_rule(gcp, ctx)
    ip = _ensure_address(gcp, ctx)
    infra.LoadBalancerDNSName = ip
    ctx.save()
    ctx.log(f"health check {name}: GET {hc.path} on {hc.port} every {hc.interval_seconds}s; address {ids.Address} {ip}")


def _ensure_address(gcp: GcpClients, ctx: Context) -> str:
    from google.cloud import compute_v1

    name = gcp_ids(ctx.infra).Address
    assert name is not None
    address = compute_v1.Address(
        name=name,
        description=description(ctx.tagger, "address"),
        address_type="EXTERNAL",
        ip_version="IPV4",
        labels=labels(ctx.tagger, "address"),
    )

    found, _ = ensure_global(gcp, ctx, "globalAddresses", "GlobalAddresses", "address", address)
    return str(found.address)


# ---- stepCreateTargetGroup ----------------------------------------------------------------------


def ensure_backend(gcp: GcpClients, ctx: Context) -> None:
    lb_backend.ensure_backend(gcp, ctx)


# ---- stepCreateListener -------------------------------------------------------------------------


def ensure_listeners(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    lb, infra, ids, spec = lb_block(ctx), ctx.infra, gcp_ids(ctx.infra), ctx.spec
    if not (ids.BackendService and ids.Address and infra.LoadBalancerDNSName):
        raise InvalidRequestError("the address and the backend service must exist before the listeners")
    ids.UrlMap, ids.HttpsProxy, ids.HttpsForwardingRule = (
        naming.url_map(spec),
        naming.https_proxy(spec),
        naming.https_rule(spec),
    )
    ids.RedirectUrlMap, ids.HttpProxy, ids.HttpForwardingRule = (
        naming.redirect_url_map(spec),
        naming.http_proxy(spec),
        naming.http_rule(spec),
    )
    ctx.save()  # intent
    backend = ref(gcp, f"global/backendServices/{ids.BackendService}")
    _ensure_url_map(gcp, ctx, ids.UrlMap, compute_v1.UrlMap(default_service=backend), "defaultService", backend)
    old_certs = certs.job_certificates(gcp, ctx)
    cert = certs.ensure_certificate(gcp, ctx, lb.domain)
    cert_ref = ref(gcp, f"global/sslCertificates/{cert}")
    _ensure_https_proxy(gcp, ctx, ref(gcp, f"global/urlMaps/{ids.UrlMap}"), cert_ref)
    _ensure_rule(gcp, ctx, ids.HttpsForwardingRule, HTTPS_PORT, ref(gcp, f"global/targetHttpsProxies/{ids.HttpsProxy}"))
    infra.LoadBalancerID = ids.HttpsForwardingRule
    ctx.save()
    # A domain change made a new certificate: the proxy uses it now, so the old ones can go.
    stale = [c for c in old_certs if c != cert]
    certs.delete_certificates(gcp, ctx, stale)

    redirect = compute_v1.HttpRedirectAction(
        https_redirect=True, redirect_response_code="MOVED_PERMANENTLY_DEFAULT", strip_query=False
    )
    _ensure_url_map(gcp, ctx, ids.RedirectUrlMap, compute_v1.UrlMap(default_url_redirect=redirect), "redirect", "")
    _ensure_http_proxy(gcp, ctx, ref(gcp, f"global/urlMaps/{ids.RedirectUrlMap}"))
    _ensure_rule(gcp, ctx, ids.HttpForwardingRule, HTTP_PORT, ref(gcp, f"global/targetHttpProxies/{ids.HttpProxy}"))
    ctx.log(
        f"listeners on {infra.LoadBalancerDNSName}: HTTPS:{HTTPS_PORT} ({cert}) -> {ids.BackendService}; "
        f"HTTP:{HTTP_PORT} -> 301 HTTPS" + (f"; removed old certificates {', '.join(stale)}" if stale else "")
    )


def _ensure_url_map(gcp: GcpClients, ctx: Context, name: str, body: Any, kind: str, backend: str) -> None:
    from google.cloud import compute_v1

    full = compute_v1.UrlMap(body)
    full.name, full.description = name, description(ctx.tagger, "url-map")
    where = ("urlMaps", "UrlMaps", "url_map")
    found, created = ensure_global(gcp, ctx, *where, full)
    if kind == "defaultService":
        stale = tail(found.default_service) != backend
    else:
        r = found.default_url_redirect
        stale = not (r.https_redirect and r.redirect_response_code == "MOVED_PERMANENTLY_DEFAULT" and not r.strip_query)
    if not created and stale:
        modify(gcp, *where, name, "patch", url_map_resource=body)


def _ensure_https_proxy(gcp: GcpClients, ctx: Context, url_map: str, cert: str) -> None:
    from google.cloud import compute_v1

    name = gcp_ids(ctx.infra).HttpsProxy
    assert name is not None
    proxy = compute_v1.TargetHttpsProxy(
        name=name, description=description(ctx.tagger, "https-proxy"), url_map=url_map, ssl_certificates=[cert]
    )
    where = ("targetHttpsProxies", "TargetHttpsProxies", "target_https_proxy")
    found, _ = ensure_global(gcp, ctx, *where, proxy)
    if [tail(c) for c in found.ssl_certificates] != [cert]:  # a new domain's certificate
        body = compute_v1.TargetHttpsProxiesSetSslCertificatesRequest(ssl_certificates=[cert])
        modify(gcp, *where, name, "setSslCertificates", target_https_proxies_set_ssl_certificates_request_resource=body)
    if tail(found.url_map) != url_map:
        modify(gcp, *where, name, "setUrlMap", url_map_reference_resource=compute_v1.UrlMapReference(url_map=url_map))


def _ensure_http_proxy(gcp: GcpClients, ctx: Context, url_map: str) -> None:
    from google.cloud import compute_v1

    name = gcp_ids(ctx.infra).HttpProxy
    assert name is not None
    proxy = compute_v1.TargetHttpProxy(name=name, description=description(ctx.tagger, "http-proxy"), url_map=url_map)
    where = ("targetHttpProxies", "TargetHttpProxies", "target_http_proxy")
    found, _ = ensure_global(gcp, ctx, *where, proxy)
    if tail(found.url_map) != url_map:
        modify(gcp, *where, name, "setUrlMap", url_map_reference_resource=compute_v1.UrlMapReference(url_map=url_map))


def _ensure_rule(gcp: GcpClients, ctx: Context, name: str, port: int, target: str) -> None:
    """A global forwarding rule on the LB's address; its target is switched in place if it moved."""
    from google.cloud import compute_v1

    rule = compute_v1.ForwardingRule(
        name=name,
        description=description(ctx.tagger, "forwarding-rule"),
        labels=labels(ctx.tagger, "forwarding-rule"),
        I_p_address=ctx.infra.LoadBalancerDNSName,
        I_p_protocol="TCP",
        port_range=str(port),
        load_balancing_scheme="EXTERNAL_MANAGED",
        target=target,
    )
    where = ("globalForwardingRules", "GlobalForwardingRules", "forwarding_rule")
    found, _ = ensure_global(gcp, ctx, *where, rule)
    if tail(found.target) != target:
        modify(gcp, *where, name, "setTarget", target_reference_resource=compute_v1.TargetReference(target=target))


# ---- stepCreateDNSRecord ------------------------------------------------------------------------


def ensure_dns_record(gcp: GcpClients, ctx: Context) -> None:
    lb, infra, ids = lb_block(ctx), ctx.infra, gcp_ids(ctx.infra)
    ip = infra.LoadBalancerDNSName
    if not ip:
        raise InvalidRequestError("the load balancer's address must exist before its DNS record")
    zone = dns.resolve_zone(gcp, lb)  # before anything is written: a domain no zone holds fails here
    ids.DnsZone = zone
    changed = dns.upsert_a(gcp, ctx, zone, lb.domain, ip)
    for rec in [r for r in ids.DnsRecords if r.Type == "A" and r.Name != dns.fqdn(lb.domain)]:
        dns.delete_record(gcp, rec)  # the domain changed: the old name no longer points at us
        ids.DnsRecords = [r for r in ids.DnsRecords if r != rec]
        ctx.save()
    ctx.log(f"DNS {dns.fqdn(lb.domain)} A {ip} (TTL {dns.TTL}) in zone {zone}{'' if changed else ', unchanged'}")
    state = certs.wait_active(gcp, ctx, lb.domain)
    if state == "ACTIVE":
        ctx.log(f"managed certificate {ids.Certificate} is ACTIVE: https://{lb.domain}/ serves")
    elif gcp.target.sandbox:
        ctx.log(
            f"sandbox: the managed certificate stays {state} (the sandbox has no DNS resolution); on Google "
            f"Cloud it turns ACTIVE once {lb.domain} resolves to {ip}"
        )
    else:
        ctx.notes.append(
            f"the managed certificate {ids.Certificate} for {lb.domain} is {state}: HTTPS serves once it is "
            f"ACTIVE (Google issues it after {lb.domain} resolves to {ip}, up to about 60 minutes); check with "
            f"`gcloud compute ssl-certificates describe {ids.Certificate} --global --project {gcp.project}` "
            f"or `vmplane status {ctx.spec.name}`"
        )
        ctx.log(ctx.notes[-1])
