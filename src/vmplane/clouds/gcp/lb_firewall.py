"""The firewall rule the load balancer needs: Google's health checkers and GFE proxies (the only sources
an external Application Load Balancer's traffic comes from) to the VMs' network tag, on the
health-check port and the serving port. The VPC-ingress rule (firewall.py) is not touched, so a
detach leaves the VMs exactly as they were before the load balancer.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import naming, operations
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.lb_refs import HEALTH_CHECK_RANGES, ensure, lb_block, network_ref
from vmplane.clouds.gcp.ownership import description, owned_by
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.models import LoadBalancer

PURPOSE = "health"


def health_ports(lb: LoadBalancer) -> list[str]:
    """The ports Google's checkers and proxies reach the VMs on: the health check's and the serving one."""
    return sorted({str(lb.health_check.port), str(lb.target_port)}, key=int)


def ensure_health_rule(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    lb, infra, ids = lb_block(ctx), ctx.infra, gcp_ids(ctx.infra)
    if not infra.NetworkID:
        raise InvalidRequestError("the network must exist before the load balancer's firewall rule")
    name = naming.firewall(ctx.spec, PURPOSE)
    ports = health_ports(lb)
    tag = ids.NetworkTag or naming.network_tag(ctx.spec)
    client = gcp.compute("Firewalls")
    desired = compute_v1.Firewall(
        name=name,
        description=description(ctx.tagger, "firewall"),
        network=network_ref(gcp, infra.NetworkID),
        direction="INGRESS",
        priority=1000,
        source_ranges=HEALTH_CHECK_RANGES,
        target_tags=[tag],
        allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=ports)],
    )
    ids.FirewallRules = {**ids.FirewallRules, PURPOSE: name}
    ctx.save()  # intent: teardown deletes it by this record even if we crash mid-insert

    def get() -> Any:
        return client.get(project=gcp.project, firewall=name, timeout=CALL_TIMEOUT)

    def insert(request_id: str) -> Any:
        req = compute_v1.InsertFirewallRequest(project=gcp.project, firewall_resource=desired, request_id=request_id)
        return client.insert_unary(request=req, timeout=CALL_TIMEOUT)

    rule, created = ensure(gcp, ctx, "firewalls", name, get=get, insert=insert)
    current = [(a.I_p_protocol, sorted(a.ports, key=int)) for a in rule.allowed]
    if not created and (
        current != [("tcp", ports)]
        or sorted(rule.source_ranges) != sorted(HEALTH_CHECK_RANGES)
        or list(rule.target_tags) != [tag]
    ):
        # A health-check or serving port change: the rule is patched in place.
        patch = compute_v1.Firewall(source_ranges=HEALTH_CHECK_RANGES, target_tags=[tag], allowed=desired.allowed)
        operations.run(
            gcp,
            "compute.firewalls.patch",
            lambda: client.patch_unary(
                project=gcp.project, firewall=name, firewall_resource=patch, timeout=CALL_TIMEOUT
            ),
            what=f"update {name}",
        )
    ctx.log(f"firewall {name}: tcp {','.join(ports)} from {' '.join(HEALTH_CHECK_RANGES)} to tag {tag}")


def delete_health_rule(gcp: GcpClients, ctx: Context) -> None:
    ids = gcp_ids(ctx.infra)
    name = ids.FirewallRules.get(PURPOSE) or naming.firewall(ctx.spec, PURPOSE)
    client = gcp.compute("Firewalls")
    found = operations.find(
        gcp, "compute.firewalls.get", lambda: client.get(project=gcp.project, firewall=name, timeout=CALL_TIMEOUT)
    )
    if found is not None and owned_by(found, ctx.tagger):
        operations.remove(
            gcp,
            "compute.firewalls.delete",
            lambda: client.delete_unary(project=gcp.project, firewall=name, timeout=CALL_TIMEOUT),
            what=f"delete {name}",
        )
    ids.FirewallRules = {k: v for k, v in ids.FirewallRules.items() if k != PURPOSE}
    ctx.save()
