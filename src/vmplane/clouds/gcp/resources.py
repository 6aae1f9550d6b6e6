"""The Google Cloud resource table: every kind the GCP driver makes (and those only the generated stack
makes), declared once with its Terraform type, the steps that create and delete it, its role and how it
is observed and deleted. Leftovers (`inventory.leftovers`), drift's observed and extra resources and the
resource-table test's type checks all read this table.

Observation is read-only. Compute resources are listed by the environment's name prefix and kept when
their description (or labels) carry the job's id (`inventory.is_ours`), as the leftover scan always did;
firewall rules also when they sit on the network the job created (a rule someone added to it by hand is
the job's drift even without its tags). The service account is read by its email, DNS records (which
take no labels) from the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.drift import Observed
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.inventory import is_ours, named_like
from vmplane.clouds.gcp.operations import last_segment, remove
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.resources import ResourceKind, ResourceTable

Fields = Callable[[Any], Mapping[str, Any]]


def _none(_r: Any) -> Mapping[str, Any]:
    return {}


def firewall_fields(rule: Any) -> dict[str, Any]:
    """What drift compares of a rule (a compute_v1.Firewall, read or desired), as JSON values."""
    return {
        "allowed": sorted(f"{a.I_p_protocol}:{p}" for a in rule.allowed for p in (a.ports or ["all"])),
        "sourceRanges": sorted(rule.source_ranges),
        "targetTags": sorted(rule.target_tags),
        "direction": rule.direction or "INGRESS",
        "disabled": bool(rule.disabled),
    }


def _instance_fields(inst: Any) -> Mapping[str, Any]:
    return {"status": inst.status}


def _router_fields(router: Any) -> Mapping[str, Any]:
    from vmplane.clouds.gcp.network import nat_ok

    return {"nats": sorted(n.name for n in router.nats if nat_ok(n))}


def _backend_fields(service: Any) -> Mapping[str, Any]:
    return {"backends": sorted(last_segment(b.group) for b in service.backends)}


def _rule_fields(rule: Any) -> Mapping[str, Any]:
    return {"target": last_segment(rule.target or "")}


def _tags(resource: Any) -> dict[str, str]:
    """Labels where the kind takes them (what drift's tag checks read), else the description's tag set."""
    labels = dict(getattr(resource, "labels", None) or {})
    return labels or ownership.tags_of(resource)


def _compute(
    client: str, collection: str, scope: str, kind: str, fields: Fields = _none
) -> Callable[[GcpClients, Context], list[Observed]]:
    def observe(gcp: GcpClients, ctx: Context) -> list[Observed]:
        return [
            Observed(kind, r.name, r.name, _tags(r), fields(r))
            for r in named_like(gcp, ctx, client, collection, scope)
            if is_ours(r, ctx.tagger)
        ]

    return observe


def _firewalls(gcp: GcpClients, ctx: Context) -> list[Observed]:
    """The job's rules, and every rule on the network the job created (a hand-made one is drift)."""
    own = ctx.infra.NetworkID if ctx.infra.NetworkCreated else None
    api = gcp.compute("Firewalls")
    listed = gcp.call(
        "compute.firewalls.list",
        lambda: list(api.list(request={"project": gcp.project}, timeout=CALL_TIMEOUT)),
    )
    prefix = naming.prefix(ctx.spec)
    return [
        Observed("firewall", r.name, r.name, ownership.tags_of(r), firewall_fields(r))
        for r in listed
        if (r.name.startswith(prefix) and is_ours(r, ctx.tagger)) or (own and last_segment(r.network) == own)
    ]


def _service_account(gcp: GcpClients, ctx: Context) -> list[Observed]:
    from vmplane.clouds.gcp.identity import get_account

    email = gcp_ids(ctx.infra).ServiceAccountEmail or naming.service_account_email(ctx.spec, gcp.project)
    sa = get_account(gcp, email)
    if sa is None or not ownership.owned_by(sa, ctx.tagger):
        return []
    return [Observed("service-account", email, email, ownership.tags_of(sa))]


def _dns_records(gcp: GcpClients, ctx: Context) -> list[Observed]:
    rrsets = gcp.dns.resourceRecordSets()
    out = []
    for rec in gcp_ids(ctx.infra).DnsRecords:
        try:
            req = rrsets.list(project=gcp.project, managedZone=rec.Zone, name=rec.Name, type=rec.Type)
            found = gcp.call("dns.resourceRecordSets.list", req.execute)
        except NotFoundError:  # the zone itself is gone
            continue
        for rr in found.get("rrsets", []):
            fields = {"rrdatas": sorted(rr.get("rrdatas", []))}
            out.append(Observed("dns-record-set", f"{rec.Zone}/{rec.Name}/{rec.Type}", rec.Name, {}, fields))
    return out


def _delete(client: str, collection: str, key: str, scope: str) -> Callable[[GcpClients, Context, str], None]:
    """Delete one by name (regional and zonal kinds in the job's region / recorded zones); gone is done."""

    def delete(gcp: GcpClients, ctx: Context, name: str) -> None:
        api = gcp.compute(client)
        where: list[dict[str, str]] = [{}]
        if scope == "region":
            where = [{"region": ctx.spec.provider.region}]
        elif scope == "zone":
            where = [{"zone": z} for z in ctx.infra.Zones]
        for w in where:
            call = partial(api.delete_unary, project=gcp.project, timeout=CALL_TIMEOUT, **{key: name}, **w)
            remove(gcp, f"compute.{collection}.delete", call, what=f"delete {collection} {name}")

    return delete


def _kind(
    kind: str,
    tf_type: str,
    step: str,
    teardown: str,
    role: str | None,
    api: tuple[str, str, str, str] | None,
    fields: Fields = _none,
    **extra: Any,
) -> ResourceKind[GcpClients]:
    """A compute kind listed by prefix and deleted by name: api = (client, collection, scope, get key)."""
    if api is None:
        return ResourceKind(kind, tf_type, step, teardown, role, **extra)
    client, collection, scope, key = api
    return ResourceKind(
        kind,
        tf_type,
        step,
        teardown,
        role,
        observe=_compute(client, collection, scope, kind, fields),
        delete=_delete(client, collection, key, scope),
        **extra,
    )


NET, IAM, TPL, VMS = "stepCreateNetwork", "stepCreateIAM", "stepCreateLaunchTemplate", "stepCreateVMs"
FRONT, BACK, LISTEN, DNS = (
    "stepCreateLoadBalancer",
    "stepCreateTargetGroup",
    "stepCreateListener",
    "stepCreateDNSRecord",
)
DEL_NET, DEL_FW, DEL_IAM = "stepDeleteNetwork", "stepDeleteSecurityGroup", "stepDeleteIAM"
DEL_TPL, DEL_VMS, DETACH = "stepDeleteLaunchTemplate", "stepTerminateVMs", "stepDetachLoadBalancer"

TABLE: ResourceTable[GcpClients] = ResourceTable(
    "gcp",
    (
        _kind(
            "network", "google_compute_network", NET, DEL_NET, "network", ("Networks", "networks", "global", "network")
        ),
        _kind(
            "subnetwork",
            "google_compute_subnetwork",
            NET,
            DEL_NET,
            "subnet-private",
            ("Subnetworks", "subnetworks", "region", "subnetwork"),
        ),
        _kind(
            "router",
            "google_compute_router",
            NET,
            DEL_NET,
            "router",
            ("Routers", "routers", "region", "router"),
            _router_fields,
        ),
        _kind(
            "router-nat",
            "google_compute_router_nat",
            NET,
            DEL_NET,
            None,
            None,
            note="a part of its router (routers.insert / patch carry it): observed through the router",
        ),
        ResourceKind(
            "firewall",
            "google_compute_firewall",
            NET,
            DEL_FW,
            "firewall",
            observe=_firewalls,
            delete=_delete("Firewalls", "firewalls", "firewall", "global"),
            note="the health checkers' rule is the load balancer's (stepCreateLoadBalancer, deleted by detach)",
        ),
        ResourceKind(
            "service-account",
            "google_service_account",
            IAM,
            DEL_IAM,
            "vm",
            observe=_service_account,
            note="IAM, not compute: read by its email",
        ),
        _kind(
            "iam-member",
            "google_project_iam_member",
            IAM,
            DEL_IAM,
            None,
            None,
            note="a binding in the project's IAM policy, not a resource: granted and revoked with the account",
        ),
        _kind(
            "secret-iam-member",
            "google_secret_manager_secret_iam_member",
            IAM,
            DEL_IAM,
            None,
            None,
            note="our member in a referenced secret's policy (secret_iam.py); leftovers checks it, drift does not",
        ),
        _kind(
            "region-instance-template",
            "google_compute_region_instance_template",
            TPL,
            DEL_TPL,
            "template",
            ("RegionInstanceTemplates", "regionInstanceTemplates", "region", "instance_template"),
        ),
        _kind(
            "instance",
            "google_compute_instance",
            VMS,
            DEL_VMS,
            "vm",
            ("Instances", "instances", "zone", "instance"),
            _instance_fields,
            note="Fixed VMs; a MIG's members are listed too (the template's description) and belong to it",
        ),
        _kind(
            "resource-policy",
            "google_compute_resource_policy",
            VMS,
            DEL_VMS,
            "schedule",
            ("ResourcePolicies", "resourcePolicies", "region", "resource_policy"),
        ),
        _kind(
            "region-instance-group-manager",
            "google_compute_region_instance_group_manager",
            VMS,
            DEL_VMS,
            "mig",
            ("RegionInstanceGroupManagers", "regionInstanceGroupManagers", "region", "instance_group_manager"),
        ),
        _kind(
            "region-autoscaler",
            "google_compute_region_autoscaler",
            VMS,
            DEL_VMS,
            "autoscaler",
            ("RegionAutoscalers", "regionAutoscalers", "region", "autoscaler"),
        ),
        _kind(
            "health-check",
            "google_compute_health_check",
            FRONT,
            DETACH,
            "health-check",
            ("HealthChecks", "healthChecks", "global", "health_check"),
        ),
        _kind(
            "global-address",
            "google_compute_global_address",
            FRONT,
            DETACH,
            "address",
            ("GlobalAddresses", "globalAddresses", "global", "address"),
        ),
        _kind(
            "instance-group",
            "google_compute_instance_group",
            BACK,
            DETACH,
            "instance-group",
            ("InstanceGroups", "instanceGroups", "zone", "instance_group"),
            note="Fixed pools behind a load balancer: one unmanaged group per zone",
        ),
        _kind(
            "backend-service",
            "google_compute_backend_service",
            BACK,
            DETACH,
            "backend-service",
            ("BackendServices", "backendServices", "global", "backend_service"),
            _backend_fields,
        ),
        _kind(
            "url-map", "google_compute_url_map", LISTEN, DETACH, "url-map", ("UrlMaps", "urlMaps", "global", "url_map")
        ),
        _kind(
            "ssl-certificate",
            "google_compute_managed_ssl_certificate",
            LISTEN,
            DETACH,
            "certificate",
            ("SslCertificates", "sslCertificates", "global", "ssl_certificate"),
        ),
        _kind(
            "target-https-proxy",
            "google_compute_target_https_proxy",
            LISTEN,
            DETACH,
            "https-proxy",
            ("TargetHttpsProxies", "targetHttpsProxies", "global", "target_https_proxy"),
        ),
        _kind(
            "target-http-proxy",
            "google_compute_target_http_proxy",
            LISTEN,
            DETACH,
            "http-proxy",
            ("TargetHttpProxies", "targetHttpProxies", "global", "target_http_proxy"),
        ),
        _kind(
            "global-forwarding-rule",
            "google_compute_global_forwarding_rule",
            LISTEN,
            DETACH,
            "forwarding-rule",
            ("GlobalForwardingRules", "globalForwardingRules", "global", "forwarding_rule"),
            _rule_fields,
        ),
        ResourceKind(
            "dns-record-set",
            "google_dns_record_set",
            DNS,
            DETACH,
            None,
            observe=_dns_records,
            note="record sets take no labels or description: read from the record (GcpInfra.DnsRecords)",
        ),
        _kind(
            "secret",
            "google_secret_manager_secret",
            IAM,
            DEL_IAM,
            None,
            None,
            direct=False,
            note="the stack's record of the runtime settings; the direct pipeline pushes them over exec, keeps none",
        ),
        _kind(
            "secret-version",
            "google_secret_manager_secret_version",
            IAM,
            DEL_IAM,
            None,
            None,
            direct=False,
            note="the stack's runtime settings, the secret's one version",
        ),
        _kind(
            "ssl-policy",
            "google_compute_ssl_policy",
            LISTEN,
            DETACH,
            None,
            None,
            direct=False,
            note=(
                "a known gap: the stack pins TLS 1.2+ with an SSL policy; the direct pipeline leaves the HTTPS "
                "proxy on Google's default policy (no ssl-policy resource)"
            ),
        ),
    ),
)
