"""What of a job remains in the project: every kind the GCP driver creates, listed by the environment's
name prefix and kept when its description (or, for labelled kinds, its labels) carries this job's id.

stepUnregisterSpace fails while this is not empty, so a teardown that missed something says what.
Record sets take no labels or descriptions: the recorded `GcpInfra.DnsRecords` are checked instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from vmplane.clouds.base import Context, Leftover, Tagger
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.network import region_zones
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.tags import gcp_labels

# (kind as Leftover says it, compute client, API collection, scope): scope is global, region or zone.
KINDS: list[tuple[str, str, str, str]] = [
    ("instance", "Instances", "instances", "zone"),
    ("instance-group", "InstanceGroups", "instanceGroups", "zone"),
    ("region-instance-group-manager", "RegionInstanceGroupManagers", "regionInstanceGroupManagers", "region"),
    ("region-autoscaler", "RegionAutoscalers", "regionAutoscalers", "region"),
    ("resource-policy", "ResourcePolicies", "resourcePolicies", "region"),
    ("region-instance-template", "RegionInstanceTemplates", "regionInstanceTemplates", "region"),
    ("instance-template", "InstanceTemplates", "instanceTemplates", "global"),
    ("global-forwarding-rule", "GlobalForwardingRules", "globalForwardingRules", "global"),
    ("target-https-proxy", "TargetHttpsProxies", "targetHttpsProxies", "global"),
    ("target-http-proxy", "TargetHttpProxies", "targetHttpProxies", "global"),
    ("url-map", "UrlMaps", "urlMaps", "global"),
    ("ssl-certificate", "SslCertificates", "sslCertificates", "global"),
    ("backend-service", "BackendServices", "backendServices", "global"),
    ("health-check", "HealthChecks", "healthChecks", "global"),
    ("global-address", "GlobalAddresses", "globalAddresses", "global"),
    ("firewall", "Firewalls", "firewalls", "global"),
    ("router", "Routers", "routers", "region"),
    ("subnetwork", "Subnetworks", "subnetworks", "region"),
    ("network", "Networks", "networks", "global"),
]


def is_ours(resource: Any, tagger: Tagger) -> bool:
    """The job id in the description (every kind) or in the labels (kinds that take labels)."""
    if ownership.owned_by(resource, tagger):
        return True
    want = gcp_labels({tagger.job_key: tagger.job_id})
    labels = dict(getattr(resource, "labels", None) or {})
    return bool(labels) and all(labels.get(k) == v for k, v in want.items())


def named_like(gcp: GcpClients, ctx: Context, client: str, collection: str, scope: str) -> Iterator[Any]:
    """Every resource of one collection whose name starts with the environment's prefix."""
    api = gcp.compute(client)
    flt = f"name eq {re.escape(naming.prefix(ctx.spec))}.*"
    region = ctx.spec.provider.region
    scopes: list[dict[str, str]] = [{}]
    if scope == "region":
        scopes = [{"region": region}]
    elif scope == "zone":
        zones = ctx.infra.Zones or region_zones(gcp, region)
        scopes = [{"zone": z} for z in zones]
    for where in scopes:
        # The pager fetches further pages lazily: list() inside the call counts and retries them with it.
        pages: Callable[[], Any] = partial(
            api.list, request={"project": gcp.project, "filter": flt, **where}, timeout=CALL_TIMEOUT
        )
        found: list[Any] = gcp.call(f"compute.{collection}.list", partial(_all, pages))
        yield from found


def _all(pages: Callable[[], Any]) -> list[Any]:
    return list(pages())


def leftovers(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    out: list[Leftover] = []
    for kind, client, collection, scope in KINDS:
        out += [
            Leftover(kind, r.name) for r in named_like(gcp, ctx, client, collection, scope) if is_ours(r, ctx.tagger)
        ]
    out += _service_account(gcp, ctx)
    out += _dns_records(gcp, ctx)
    return out


def _service_account(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    email = gcp_ids(ctx.infra).ServiceAccountEmail or naming.service_account_email(ctx.spec, gcp.project)
    sas = gcp.iam.projects().serviceAccounts()
    name = f"projects/{gcp.project}/serviceAccounts/{email}"
    try:
        sa = gcp.call("iam.projects.serviceAccounts.get", lambda: sas.get(name=name).execute())
    except NotFoundError:
        return []
    return [Leftover("service-account", email)] if ownership.owned_by(sa, ctx.tagger) else []


def _dns_records(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    rrsets = gcp.dns.resourceRecordSets()
    out = []
    for rec in gcp_ids(ctx.infra).DnsRecords:
        try:
            req = rrsets.list(project=gcp.project, managedZone=rec.Zone, name=rec.Name, type=rec.Type)
            found = gcp.call("dns.resourceRecordSets.list", req.execute)
        except NotFoundError:  # the zone itself is gone
            continue
        if found.get("rrsets"):
            out.append(Leftover("dns-record-set", f"{rec.Zone}/{rec.Name}/{rec.Type}"))
    return out
