"""Removing the load balancer (`vmplane lb detach`, and teardown's first step), dependents first: the
DNS record, the forwarding rules, the proxies, the URL maps, the certificates, the backend service,
the unmanaged instance groups, the MIGs' autohealing on the health check, the health check, the
health-checkers' firewall rule and the address.

Every part is found by its deterministic name as well as by the record (a crash may have created
something the record does not list yet), deleted only if its description carries this job's tags,
and deleted under the teardown rule (NotFound is done, "in use" retried). The VMs stay: on Google
Cloud their VPC-ingress rule never changed for the LB, so `keep_vms` needs nothing more (AWS has to
put the VM group's VPC rules back).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.gcp import autohealing, certs, dns, lb_backend, lb_firewall, naming, operations
from vmplane.clouds.gcp.ids import GcpInfra, gcp_ids
from vmplane.clouds.gcp.ownership import owned_by
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.state import InfraConfig


def detach(gcp: GcpClients, ctx: Context, *, keep_vms: bool) -> None:
    """Remove every LB part of the job; the VMs and the VPC rule stay (`keep_vms` or not)."""
    del keep_vms  # nothing of the VMs' own configuration changed for the LB on GCP
    infra, ids, spec = ctx.infra, gcp_ids(ctx.infra), ctx.spec
    if not started(infra):
        ctx.log("no load balancer was created for this job")
        return
    for rec in [r for r in ids.DnsRecords if r.Type == "A"]:
        dns.delete_record(gcp, rec)  # exact record set, and only one this job wrote
        ids.DnsRecords = [r for r in ids.DnsRecords if r != rec]
        ctx.save()
    deleted: list[str] = []
    # (collection, client, id keyword, recorded name, deterministic name, GcpInfra field)
    parts: list[tuple[str, str, str, str | None, str, str]] = [
        ("globalForwardingRules", "GlobalForwardingRules", "forwarding_rule", ids.HttpForwardingRule,
         naming.http_rule(spec), "HttpForwardingRule"),
        ("globalForwardingRules", "GlobalForwardingRules", "forwarding_rule", ids.HttpsForwardingRule,
         naming.https_rule(spec), "HttpsForwardingRule"),
        ("targetHttpProxies", "TargetHttpProxies", "target_http_proxy", ids.HttpProxy,
         naming.http_proxy(spec), "HttpProxy"),
        ("targetHttpsProxies", "TargetHttpsProxies", "target_https_proxy", ids.HttpsProxy,
         naming.https_proxy(spec), "HttpsProxy"),
        ("urlMaps", "UrlMaps", "url_map", ids.RedirectUrlMap, naming.redirect_url_map(spec), "RedirectUrlMap"),
        ("urlMaps", "UrlMaps", "url_map", ids.UrlMap, naming.url_map(spec), "UrlMap"),
    ]  # fmt: skip
    for collection, client, key, recorded, name, field in parts:
        deleted += _delete_global(gcp, ctx, collection, client, key, {recorded, name})
        setattr(ids, field, None)
        if field == "HttpsForwardingRule":
            infra.LoadBalancerID = None
        ctx.save()
    names = set(certs.job_certificates(gcp, ctx)) | ({ids.Certificate} if ids.Certificate else set())
    for cert in sorted(names):
        deleted += _delete_global(gcp, ctx, "sslCertificates", "SslCertificates", "ssl_certificate", {cert})
    ids.Certificate = ids.CertificateStatus = None
    ctx.save()
    later: list[tuple[str, str, str, str | None, str, str]] = [
        ("backendServices", "BackendServices", "backend_service", ids.BackendService,
         naming.backend_service(spec), "BackendService"),
    ]  # fmt: skip
    for collection, client, key, recorded, name, field in later:
        deleted += _delete_global(gcp, ctx, collection, client, key, {recorded, name})
        setattr(ids, field, None)
        ctx.save()
    zones = set(infra.Zones) | set(ids.InstanceGroups)
    for zone in sorted(zones):
        recorded = ids.InstanceGroups.get(zone)
        for group in sorted({naming.instance_group(spec, zone)} | ({recorded} if recorded else set())):
            lb_backend.delete_group(gcp, ctx, zone, group)
    ids.InstanceGroups = {}
    autohealing.clear_all(gcp, ctx)  # Google refuses to delete a health check a MIG heals on
    deleted += _delete_global(
        gcp, ctx, "healthChecks", "HealthChecks", "health_check", {ids.HealthCheck, naming.health_check(spec)}
    )
    ids.HealthCheck = None
    ctx.save()
    lb_firewall.delete_health_rule(gcp, ctx)
    deleted += _delete_global(
        gcp, ctx, "globalAddresses", "GlobalAddresses", "address", {ids.Address, naming.address(spec)}
    )
    _clear(infra, ids)
    ctx.save()
    ctx.log(f"load balancer removed ({len(deleted)} resources deleted): {', '.join(deleted) or 'none left'}")


def _delete_global(
    gcp: GcpClients, ctx: Context, collection: str, client_name: str, key: str, names: set[str | None]
) -> list[str]:
    """Delete the job's global resources of these names; returns the names this call deleted."""
    client = gcp.compute(client_name)
    out: list[str] = []
    kw: dict[str, Any] = {"project": gcp.project, "timeout": CALL_TIMEOUT}
    for name in sorted(n for n in names if n):
        found = operations.find(gcp, f"compute.{collection}.get", partial(client.get, **{key: name}, **kw))
        if found is None:
            continue
        if not owned_by(found, ctx.tagger):
            ctx.log(f"{name} is not this job's (by its description): left alone")
            continue
        call = partial(client.delete_unary, **{key: name}, **kw)
        if operations.remove(gcp, f"compute.{collection}.delete", call, what=f"delete {name}"):
            out.append(name)
    return out


def _clear(infra: InfraConfig, ids: GcpInfra) -> None:
    infra.LoadBalancerID = infra.LoadBalancerDNSName = None
    ids.HealthCheck = ids.BackendService = ids.UrlMap = ids.RedirectUrlMap = None
    ids.Certificate = ids.CertificateStatus = ids.HttpsProxy = ids.HttpProxy = ids.Address = None
    ids.HttpsForwardingRule = ids.HttpForwardingRule = ids.DnsZone = None
    ids.InstanceGroups = {}
    ids.FirewallRules = {k: v for k, v in ids.FirewallRules.items() if k != lb_firewall.PURPOSE}


def started(infra: InfraConfig) -> bool:
    """Whether any LB part may exist: stepCreateLoadBalancer records names before creating anything,
    and detach clears them last. Saves ~15 lookups on the teardown of an environment without an LB."""
    ids = gcp_ids(infra)
    return bool(
        infra.LoadBalancerID
        or infra.LoadBalancerDNSName
        or ids.HealthCheck
        or ids.Address
        or ids.BackendService
        or ids.UrlMap
        or ids.RedirectUrlMap
        or ids.Certificate
        or ids.HttpsProxy
        or ids.HttpProxy
        or ids.HttpsForwardingRule
        or ids.HttpForwardingRule
        or ids.InstanceGroups
        or ids.DnsRecords
        or lb_firewall.PURPOSE in ids.FirewallRules
    )
