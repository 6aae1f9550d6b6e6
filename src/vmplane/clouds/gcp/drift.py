"""The GCP driver's drift: what the spec and the record say the project holds (`Expected`), what it holds
(`TABLE.observe`, read-only), compared by `clouds.drift.compare`.

Names are deterministic and recorded, so every expectation matches by name (the record's id is the
name). What is compared: a Fixed VM's power state and labels; a firewall rule's ports, sources, target
tags, direction and whether it is disabled; the Cloud NAT on the router (a part of the router, observed
through it); the backend service's groups; a forwarding rule's target and labels; the global address's
labels; a DNS record's data. The rest is compared by existence. Extras: anything of an observed kind
that carries the job's id (or is a firewall rule on the job's network) and that nothing expects.

On an existing network (the user's), a rule not vmplane's that targets the VMs' network tag is reported
as an extra that is not repairable. Not expected, so never extra: a MIG's members (the group owns them,
`mig` reconciles the records) and older template versions still recorded (kept for the VMs made from
them; teardown deletes them all).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.drift import Drift, DriftChange, Expected, Observed, compare
from vmplane.clouds.gcp import lb_firewall, naming, ownership
from vmplane.clouds.gcp.firewall import desired_rules, rule_body
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import instance_name
from vmplane.clouds.gcp.lb_refs import HEALTH_CHECK_RANGES
from vmplane.clouds.gcp.operations import last_segment
from vmplane.clouds.gcp.resources import TABLE, firewall_fields
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.models import AsgPool, FixedPool
from vmplane.state import VMRecord

# What apply does about a Fixed VM in the wrong power state, by the state it should be in.
POWER_REPAIR = {
    "RUNNING": "started (the file wants it running now) and its labels set back",
    "TERMINATED": "stopped again by the VM step (its pool is stopped) and its labels set back",
}


USERS_RULE = "reported only: a rule on your network (network.existingVpcId), not vmplane's"


def drift(gcp: GcpClients, ctx: Context) -> list[Drift]:
    observed = _known_parts_removed(ctx, _with_nats(TABLE.observe(gcp, ctx)))
    users = _users_rules(gcp, ctx)
    found = compare(expected(gcp, ctx), observed + users, extra_kinds=TABLE.observed_kinds(), address=TABLE.address)
    theirs = {o.id for o in users}
    return [_named(d, theirs) if d.change is DriftChange.extra else d for d in found]


def _named(extra: Drift, theirs: set[str]) -> Drift:
    """The user's rule among the extras: reported only."""
    if extra.kind == "firewall" and extra.id in theirs:
        return replace(extra, repair=USERS_RULE, repairable=False)
    return extra


def _users_rules(gcp: GcpClients, ctx: Context) -> list[Observed]:
    """On an existing network (the user's), the rules not vmplane's that target the environment's VMs by
    their network tag: about the job's VMs, so reported, but the user's, so never changed. Read here, not
    by the table's observer: they are not the job's, and teardown must not wait for them to go."""
    infra = ctx.infra
    if infra.NetworkCreated or not infra.NetworkID:
        return []
    tag = gcp_ids(infra).NetworkTag or naming.network_tag(ctx.spec)
    api = gcp.compute("Firewalls")
    listed = gcp.call(
        "compute.firewalls.list", lambda: list(api.list(request={"project": gcp.project}, timeout=CALL_TIMEOUT))
    )
    network = last_segment(infra.NetworkID)
    return [
        Observed("firewall", r.name, r.name, {}, firewall_fields(r))
        for r in listed
        if last_segment(r.network) == network and tag in r.target_tags and not ownership.owned_by(r, ctx.tagger)
    ]


def wanted_status(ctx: Context, rec: VMRecord, at: datetime | None = None) -> str | None:
    """The power state a Fixed VM should be in, or None when it is not vmplane's to say (a schedule
    that has the pool stopped now: Google's scheduler acts within minutes of its hour, not on it)."""
    pool = ctx.spec.pools.get(rec.Pool)
    if rec.Pool in ctx.infra.StoppedPools:
        return "TERMINATED"  # `vmplane stop`: the VM step keeps it stopped
    if isinstance(pool, FixedPool) and pool.schedule is not None:
        return "RUNNING" if pool.schedule.is_running_at(at or datetime.now(UTC)) else None
    return "RUNNING"


def fixed_vms(ctx: Context) -> list[VMRecord]:
    """The records of Fixed-pool VMs (a MIG's members are the group's, not expected one by one)."""
    fixed = {n for n, p in ctx.spec.pools.items() if isinstance(p, FixedPool)}
    return [v for v in ctx.infra.VMs if v.Pool in fixed and v.Pool not in ctx.infra.ScalingGroupID and v.Index >= 0]


def _exp(kind: str, name: str | None, **kw: Any) -> list[Expected]:
    """One expectation matched by name (the record's id is the name), or none when nothing is recorded."""
    return [Expected(TABLE.kind(kind).address(name), kind, name, name, **kw)] if name else []


def expected(gcp: GcpClients, ctx: Context) -> list[Expected]:
    spec, infra, ids, t = ctx.spec, ctx.infra, gcp_ids(ctx.infra), ctx.tagger
    out: list[Expected] = []
    if infra.NetworkCreated:
        out += _exp("network", infra.NetworkID)
        for sub in infra.VMSubnetIDs:
            out += _exp("subnetwork", sub)
        out += _exp("router", ids.RouterName)
        out += _exp("router-nat", ids.NatName, repair_missing="put back on its router by the network step")
    rules = desired_rules(ctx)
    for purpose, name in sorted(ids.FirewallRules.items()):
        if purpose in rules:
            ports, sources = rules[purpose]
            fields = firewall_fields(rule_body(ctx, gcp.project, purpose, ports, sources))
        elif purpose == lb_firewall.PURPOSE and spec.load_balancer is not None:
            fields = _health_rule(ctx)
        else:
            continue  # a purpose the spec dropped: the firewall step deletes it
        out += _exp("firewall", name, fields=fields)
    out += _exp("service-account", ids.ServiceAccountEmail)
    for pool_name in spec.pools:
        out += _exp("region-instance-template", infra.LaunchTemplateID.get(pool_name))
    for rec in fixed_vms(ctx):
        status = wanted_status(ctx, rec)
        out += _exp(
            "instance",
            instance_name(rec),
            fields={"status": status} if status else {},
            tags=ownership.labels(t, "vm"),
            repair_missing="created again under its name by the VM step",
            repair_changed=POWER_REPAIR.get(status or "", "its labels set back"),
        )
    for policy in ids.SchedulePolicies.values():
        out += _exp("resource-policy", policy)
    for pool_name in [n for n, p in spec.pools.items() if isinstance(p, AsgPool)]:
        if pool_name in infra.ScalingGroupID:
            out += _exp("region-instance-group-manager", last_segment(infra.ScalingGroupID[pool_name]))
        out += _exp("region-autoscaler", ids.Autoscalers.get(pool_name))
    if spec.load_balancer is not None:
        out += _lb(ctx)
    return out


def _health_rule(ctx: Context) -> dict[str, Any]:
    from google.cloud import compute_v1

    assert ctx.spec.load_balancer is not None
    rule = compute_v1.Firewall(
        direction="INGRESS",
        source_ranges=HEALTH_CHECK_RANGES,
        target_tags=[gcp_ids(ctx.infra).NetworkTag or naming.network_tag(ctx.spec)],
        allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=lb_firewall.health_ports(ctx.spec.load_balancer))],
    )
    return firewall_fields(rule)


def _lb(ctx: Context) -> list[Expected]:
    ids, t = gcp_ids(ctx.infra), ctx.tagger
    out = _exp("health-check", ids.HealthCheck)
    out += _exp("global-address", ids.Address, tags=ownership.labels(t, "address"))
    for group in ids.InstanceGroups.values():
        out += _exp("instance-group", group)
    asg = [last_segment(g) for p, g in ctx.infra.ScalingGroupID.items() if isinstance(ctx.spec.pools.get(p), AsgPool)]
    out += _exp(
        "backend-service",
        ids.BackendService,
        fields={"backends": sorted(asg + list(ids.InstanceGroups.values()))},
        repair_changed="its backends set back by the target group step",
    )
    out += _exp("url-map", ids.UrlMap) + _exp("url-map", ids.RedirectUrlMap)
    out += _exp("ssl-certificate", ids.Certificate)
    out += _exp("target-https-proxy", ids.HttpsProxy) + _exp("target-http-proxy", ids.HttpProxy)
    rule_labels = ownership.labels(t, "forwarding-rule")
    for rule, proxy in ((ids.HttpsForwardingRule, ids.HttpsProxy), (ids.HttpForwardingRule, ids.HttpProxy)):
        out += _exp(
            "global-forwarding-rule",
            rule,
            fields={"target": proxy},
            tags=rule_labels,
            repair_missing="created again under its name by the listener step",
        )
    kind = TABLE.kind("dns-record-set")
    for rec in ids.DnsRecords:
        key = f"{rec.Zone}/{rec.Name}/{rec.Type}"
        out.append(Expected(kind.address(rec.Name), kind.kind, key, rec.Name, fields={"rrdatas": sorted(rec.Rrdatas)}))
    return out


def _with_nats(observed: list[Observed]) -> list[Observed]:
    """The Cloud NATs, a part of their routers, as resources of their own (drift names them)."""
    nats = [
        Observed("router-nat", nat, nat) for o in observed if o.kind == "router" for nat in o.fields.get("nats", [])
    ]
    return observed + nats


def _known_parts_removed(ctx: Context, observed: list[Observed]) -> list[Observed]:
    """Without a MIG's members and the recorded older template versions: known, not expected one by one."""
    spec, ids = ctx.spec, gcp_ids(ctx.infra)
    bases = tuple(
        f"{naming.mig_base_instance_name(spec, p)}-" for p, pool in spec.pools.items() if isinstance(pool, AsgPool)
    )
    current = set(ctx.infra.LaunchTemplateID.values())
    older = {n for names in ids.Templates.values() for n in names} - current
    return [
        o
        for o in observed
        if not (o.kind == "instance" and bases and o.id.startswith(bases))
        and not (o.kind == "region-instance-template" and o.id in older)
    ]
