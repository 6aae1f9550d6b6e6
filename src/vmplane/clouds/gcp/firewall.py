"""Firewall rules on the environment's network, all INGRESS and all by the VMs' network tag:

- `vpc`: TCP `network.ingressPorts` from the VPC's own range (the neutral `VMSecurityGroupID`);
- `iap`: TCP 22 from IAP's range 35.235.240.0/20 only, and only while `exec.gcp.interactive` is true
  (`gcloud compute ssh --tunnel-through-iap`); it is deleted when that turns false.

No rule ever has 0.0.0.0/0 as a source. The health-checker rule is the load balancer's (it records it
in `GcpInfra.FirewallRules["health"]`); teardown deletes it with the rest. Rules are mutable, so a change
of ports or sources is a patch of the same rule, not a new one.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.network import network_ref
from vmplane.clouds.gcp.operations import create, find, last_segment, remove, run
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients, new_request_id

IAP_RANGE = "35.235.240.0/20"
SSH_PORT = 22


def desired_rules(ctx: Context) -> dict[str, tuple[list[int], list[str]]]:
    """purpose -> (TCP ports, source ranges) this spec wants; a purpose absent here must not exist."""
    spec, ids = ctx.spec, gcp_ids(ctx.infra)
    out: dict[str, tuple[list[int], list[str]]] = {}
    sources = sorted(ids.VpcSourceRanges) or [str(ids.NetworkCidr)]
    if spec.network.ingress_ports:
        out["vpc"] = (sorted(spec.network.ingress_ports), sources)
    if spec.exec_interactive:
        out["iap"] = ([SSH_PORT], [IAP_RANGE])
    return out


def rule_body(ctx: Context, project: str, purpose: str, ports: list[int], sources: list[str]) -> Any:
    from google.cloud import compute_v1

    return compute_v1.Firewall(
        name=naming.firewall(ctx.spec, purpose),
        network=network_ref(project, str(ctx.infra.NetworkID)),
        direction="INGRESS",
        priority=1000,
        allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=[str(p) for p in ports])],
        source_ranges=sources,
        target_tags=[naming.network_tag(ctx.spec)],
        description=ownership.description(ctx.tagger, f"firewall-{purpose}"),
    )


def _same(found: Any, want: Any) -> bool:
    """True if the rule already allows exactly what `want` does (the fields vmplane sets)."""

    def allowed(rule: Any) -> list[tuple[str, list[str]]]:
        return sorted((a.I_p_protocol, sorted(a.ports)) for a in rule.allowed)

    return (
        allowed(found) == allowed(want)
        and sorted(found.source_ranges) == sorted(want.source_ranges)
        and list(found.target_tags) == list(want.target_tags)
        and found.direction == want.direction
        and not list(found.denied)
        and not found.disabled
        and found.description == want.description
    )


def _insert(rules: Any, project: str, body: Any, request_id: str) -> Any:
    request = {"project": project, "firewall_resource": body, "request_id": request_id}
    return rules.insert_unary(request=request, timeout=CALL_TIMEOUT)


def ensure_firewall(gcp: GcpClients, ctx: Context) -> None:
    ids, project = gcp_ids(ctx.infra), gcp.project
    rules = gcp.compute("Firewalls")
    ids.NetworkTag = naming.network_tag(ctx.spec)
    wanted = desired_rules(ctx)
    for purpose, (ports, sources) in wanted.items():
        name = naming.firewall(ctx.spec, purpose)
        body = rule_body(ctx, project, purpose, ports, sources)
        found = find(
            gcp, "compute.firewalls.get", partial(rules.get, project=project, firewall=name, timeout=CALL_TIMEOUT)
        )
        if found is not None and not ownership.owned_by(found, ctx.tagger):
            raise ConflictError(
                f"firewall rule {name} already exists and belongs to {ownership.owner_of(found, ctx.tagger)}",
                code="AlreadyExists",
            )
        ids.FirewallRules[purpose] = name
        if purpose == "vpc":
            ctx.infra.VMSecurityGroupID = name
        ctx.save()  # intent first: teardown finds the rule by name and description
        if found is None:
            create(
                gcp,
                "compute.firewalls.insert",
                partial(_insert, rules, project, body),
                what=f"firewall rule {name}",
            )
            continue
        if last_segment(found.network) != ctx.infra.NetworkID:
            raise ConflictError(
                f"firewall rule {name} is on network {last_segment(found.network)}", code="AlreadyExists"
            )
        if not _same(found, body):
            # Patch replaces the lists it is given: the rule ends up allowing exactly `body`'s ports/sources.
            run(
                gcp,
                "compute.firewalls.patch",
                partial(
                    rules.patch_unary,
                    request={
                        "project": project,
                        "firewall": name,
                        "firewall_resource": body,
                        "request_id": new_request_id(),
                    },
                    timeout=CALL_TIMEOUT,
                ),
                what=f"firewall rule {name}",
            )
            ctx.log(f"firewall rule {name} updated")
    for purpose in ("vpc", "iap"):  # ours to reconcile away; "health" is the load balancer's
        if purpose not in wanted:
            _delete_rule(gcp, ctx, naming.firewall(ctx.spec, purpose))
            ids.FirewallRules.pop(purpose, None)
            if purpose == "vpc":
                ctx.infra.VMSecurityGroupID = None
            ctx.save()
    ctx.log(
        "firewall: "
        + "; ".join(f"{p} tcp/{','.join(map(str, ports))} from {', '.join(src)}" for p, (ports, src) in wanted.items())
        + ("" if "iap" in wanted else "; no port 22 (exec.gcp.interactive is false)")
    )


def _delete_rule(gcp: GcpClients, ctx: Context, name: str) -> bool:
    rules = gcp.compute("Firewalls")
    found = find(
        gcp, "compute.firewalls.get", partial(rules.get, project=gcp.project, firewall=name, timeout=CALL_TIMEOUT)
    )
    if found is None or not ownership.owned_by(found, ctx.tagger):
        return False
    return remove(
        gcp,
        "compute.firewalls.delete",
        partial(rules.delete_unary, project=gcp.project, firewall=name, timeout=CALL_TIMEOUT),
        what=f"delete firewall rule {name}",
    )


def job_rules(gcp: GcpClients, ctx: Context) -> list[Any]:
    """Every firewall rule named with the environment's prefix whose description says it is this job's."""
    rules = gcp.compute("Firewalls")
    flt = f"name eq {re.escape(naming.prefix(ctx.spec))}.*"
    found = gcp.call(
        "compute.firewalls.list",
        lambda: list(rules.list(request={"project": gcp.project, "filter": flt}, timeout=CALL_TIMEOUT)),
    )
    return [r for r in found if ownership.owned_by(r, ctx.tagger)]


# ---- teardown -------------------------------------------------------------------------------------


def delete_firewall(gcp: GcpClients, ctx: Context) -> None:
    """Every rule of this job's: the recorded ones (vpc, iap, the LB's health rule) and any other named
    with the environment's prefix and described as this job's. All recorded names carry the prefix, so
    one list finds them; a recorded name that is gone or someone else's is not touched."""
    ids, rules = gcp_ids(ctx.infra), gcp.compute("Firewalls")
    names = {r.name for r in job_rules(gcp, ctx)}
    for name in sorted(names):
        remove(
            gcp,
            "compute.firewalls.delete",
            partial(rules.delete_unary, project=gcp.project, firewall=name, timeout=CALL_TIMEOUT),
            what=f"delete firewall rule {name}",
        )
    ids.FirewallRules = {}
    ctx.infra.VMSecurityGroupID = None
    ctx.save()
    ctx.log(f"deleted {len(names)} firewall rules")
