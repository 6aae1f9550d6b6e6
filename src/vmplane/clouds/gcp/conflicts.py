"""stepValidate's name-conflict check: every deterministic name this job would create (naming.py),
looked up before anything is created, so an environment that already exists under the same org/name
(another vmplane job, a generated Terraform stack, a hand-made resource) fails the job at once instead
of half way. A resource whose description carries this job's id is not a conflict: it is a resume or
an update of the same job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError
from vmplane.clouds.gcp import identity, naming, ownership, schedule_policy
from vmplane.clouds.gcp.operations import find
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.models import AsgPool, FixedPool

# (kind, compute client, method, get kwargs builder)
Check = tuple[str, str, str, dict[str, str]]


def planned_names(ctx: Context, project: str) -> list[Check]:
    """(kind, client, api method, get() arguments) of every name the job's steps create."""
    spec, infra = ctx.spec, ctx.infra
    region = spec.provider.region
    out: list[Check] = []
    if not spec.network.existing_vpc_id:
        out += [
            ("network", "Networks", "compute.networks.get", {"network": naming.network(spec)}),
            (
                "subnetwork",
                "Subnetworks",
                "compute.subnetworks.get",
                {"region": region, "subnetwork": naming.subnetwork(spec)},
            ),
            ("router", "Routers", "compute.routers.get", {"region": region, "router": naming.router(spec)}),
        ]
    purposes = ["vpc", "iap"] + (["health"] if spec.load_balancer is not None else [])
    out += [
        ("firewall rule", "Firewalls", "compute.firewalls.get", {"firewall": naming.firewall(spec, p)})
        for p in purposes
    ]
    for pool_name, pool in spec.pools.items():
        version = infra.LaunchTemplateVersion.get(pool_name, 0) + 1
        template = naming.template(spec, pool_name, version)
        out.append(
            (
                "instance template",
                "RegionInstanceTemplates",
                "compute.regionInstanceTemplates.get",
                {"region": region, "instance_template": template},
            )
        )
        if isinstance(pool, AsgPool):
            out.append(
                (
                    "managed instance group",
                    "RegionInstanceGroupManagers",
                    "compute.regionInstanceGroupManagers.get",
                    {"region": region, "instance_group_manager": naming.mig(spec, pool_name)},
                )
            )
            out.append(
                (
                    "autoscaler",
                    "RegionAutoscalers",
                    "compute.regionAutoscalers.get",
                    {"region": region, "autoscaler": naming.autoscaler(spec, pool_name)},
                )
            )
        elif isinstance(pool, FixedPool):
            for i in range(pool.size):
                zone = infra.Zones[i % len(infra.Zones)] if infra.Zones else None
                if zone:
                    out.append(
                        (
                            "instance",
                            "Instances",
                            "compute.instances.get",
                            {"zone": zone, "instance": naming.instance(spec, pool_name, i)},
                        )
                    )
            if pool.schedule is not None:
                policy = schedule_policy.policy_name(spec, pool_name, pool.schedule)
                out.append(
                    (
                        "instance schedule",
                        "ResourcePolicies",
                        "compute.resourcePolicies.get",
                        {"region": region, "resource_policy": policy},
                    )
                )
    lb = spec.load_balancer
    if lb is not None:
        out += [
            ("health check", "HealthChecks", "compute.healthChecks.get", {"health_check": naming.health_check(spec)}),
            (
                "backend service",
                "BackendServices",
                "compute.backendServices.get",
                {"backend_service": naming.backend_service(spec)},
            ),
            ("URL map", "UrlMaps", "compute.urlMaps.get", {"url_map": naming.url_map(spec)}),
            ("URL map", "UrlMaps", "compute.urlMaps.get", {"url_map": naming.redirect_url_map(spec)}),
            (
                "SSL certificate",
                "SslCertificates",
                "compute.sslCertificates.get",
                {"ssl_certificate": naming.certificate(spec, lb.domain)},
            ),
            (
                "target HTTPS proxy",
                "TargetHttpsProxies",
                "compute.targetHttpsProxies.get",
                {"target_https_proxy": naming.https_proxy(spec)},
            ),
            (
                "target HTTP proxy",
                "TargetHttpProxies",
                "compute.targetHttpProxies.get",
                {"target_http_proxy": naming.http_proxy(spec)},
            ),
            ("global address", "GlobalAddresses", "compute.globalAddresses.get", {"address": naming.address(spec)}),
            (
                "forwarding rule",
                "GlobalForwardingRules",
                "compute.globalForwardingRules.get",
                {"forwarding_rule": naming.https_rule(spec)},
            ),
            (
                "forwarding rule",
                "GlobalForwardingRules",
                "compute.globalForwardingRules.get",
                {"forwarding_rule": naming.http_rule(spec)},
            ),
        ]
        if any(isinstance(p, FixedPool) for p in spec.pools.values()):
            out += [
                (
                    "instance group",
                    "InstanceGroups",
                    "compute.instanceGroups.get",
                    {"zone": z, "instance_group": naming.instance_group(spec, z)},
                )
                for z in infra.Zones
            ]
    return out


def _getter(gcp: GcpClients, client: str, kwargs: dict[str, str]) -> Callable[[], Any]:
    c = gcp.compute(client)
    return lambda: c.get(project=gcp.project, timeout=CALL_TIMEOUT, **kwargs)


def conflicts(gcp: GcpClients, ctx: Context) -> list[str]:
    """One line per existing name that is not this job's, naming its owner."""
    found: list[str] = []
    for kind, client, method, kwargs in planned_names(ctx, gcp.project):
        res = find(gcp, method, _getter(gcp, client, kwargs))
        if res is not None and not ownership.owned_by(res, ctx.tagger):
            found.append(f"{kind} {res.name} already exists and belongs to {ownership.owner_of(res, ctx.tagger)}")
    email = naming.service_account_email(ctx.spec, gcp.project)
    sa = identity.get_account(gcp, email)
    if sa is not None and not ownership.owned_by(sa, ctx.tagger):
        found.append(f"service account {email} already exists and belongs to {ownership.owner_of(sa, ctx.tagger)}")
    return found


def check_names(gcp: GcpClients, ctx: Context) -> None:
    found = conflicts(gcp, ctx)
    if found:
        raise ConflictError(
            f"{'; '.join(found)}. These names come from `org` and `name` ({ctx.spec.org}/{ctx.spec.name}): "
            "destroy the environment that owns them (`vmplane destroy`, or `terraform destroy` for a generated "
            "stack) or change `name`",
            code="alreadyExists",
        )
