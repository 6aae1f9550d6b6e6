"""The cluster firewall security group that opens `network.ingressPorts` (TCP) from inside the network
only: one `IN ACCEPT -p tcp -dport <port> -source <cidr>` rule per port and source range, nothing on 22.
Each VM's own firewall (enable=1, policy_in=DROP, a `GROUP` rule, firewall=1 on the NIC) is compute's.

The rules are reconciled, not appended: rules the spec no longer wants are deleted, missing ones added,
so a changed ingressPorts converges. vmplane never toggles the datacenter firewall
(`cluster/firewall/options enable`): turning it on with a default policy can lock people out of a real
cluster. VM rules only apply while it is on, so preflight warns when it is off.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.proxmox import naming, ownership
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve

SSH_PORT = 22
_RULE_KEYS = ("type", "action", "proto", "dport", "source")


def desired_rules(ctx: Context) -> list[dict[str, str]]:
    """The group's rules for this spec: tcp ingressPorts from each source range (never port 22)."""
    ids = pve_ids(ctx.infra)
    sources = sorted(ids.SourceCidrs) or ([ids.SubnetCidr] if ids.SubnetCidr else [])
    if not sources:
        raise InvalidRequestError("network: no source range for the firewall group (the network step records it)")
    return [
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": str(port), "source": cidr}
        for port in sorted(ctx.spec.network.ingress_ports)
        if port != SSH_PORT
        for cidr in sources
    ]


def _key(rule: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(rule.get(k, "")).upper() if k in ("type", "action") else str(rule.get(k, "")) for k in _RULE_KEYS)


def find_group(pve: Pve, name: str) -> dict[str, Any] | None:
    return next((g for g in pve.get("cluster/firewall/groups") or [] if g.get("group") == name), None)


def group_rules(pve: Pve, name: str) -> list[dict[str, Any]]:
    try:
        return list(pve.get(f"cluster/firewall/groups/{name}") or [])
    except NotFoundError:
        return []


def ensure_security_group(pve: Pve, ctx: Context) -> None:
    ids = pve_ids(ctx.infra)
    name = naming.security_group(ctx.job_id)
    wanted_comment = ownership.comment(ctx.tagger.tags("firewall", name))
    found = find_group(pve, name)
    if found is not None and not ownership.owned_by(found.get("comment"), ctx.tagger):
        raise ConflictError(
            f"cluster firewall group {name} already exists and belongs to "
            f"{ownership.owner_of(found.get('comment'), ctx.tagger)}",
            code="AlreadyExists",
        )
    wanted = desired_rules(ctx)
    ids.SecurityGroup = name
    ctx.save()  # intent first: the group is created with our comment, so a re-run finds it as ours
    if found is None:
        pve.post("cluster/firewall/groups", group=name, comment=wanted_comment)
    elif found.get("comment") != wanted_comment:
        pve.post("cluster/firewall/groups", group=name, rename=name, comment=wanted_comment)
    ids.SecurityGroupCreated = True
    ctx.infra.VMSecurityGroupID = name
    ctx.save()
    added, removed = reconcile_rules(pve, name, wanted)
    ctx.log(
        f"firewall group {name}: tcp/{','.join(map(str, ctx.spec.network.ingress_ports)) or '-'} from "
        f"{', '.join(sorted({r['source'] for r in wanted})) or '-'} only, nothing on 22 "
        f"({added} rules added, {removed} removed)"
    )


def reconcile_rules(pve: Pve, name: str, wanted: list[dict[str, str]]) -> tuple[int, int]:
    """Delete the group's rules not in `wanted` (highest position first: a delete shifts those after
    it), then add the missing ones. Returns (added, removed)."""
    want = {_key(r): r for r in wanted}
    have = group_rules(pve, name)
    seen: set[tuple[str, ...]] = set()
    extra = []
    for rule in have:
        key = _key(rule)
        if key in want and key not in seen and int(rule.get("enable", 0) or 0) == 1:
            seen.add(key)
        else:
            extra.append(int(rule["pos"]))
    for pos in sorted(extra, reverse=True):
        deletes.delete(partial(pve.delete, f"cluster/firewall/groups/{name}/{pos}"), what=f"delete {name} rule {pos}")
    missing = [r for k, r in want.items() if k not in seen]
    for rule in reversed(missing):  # each create goes in front: the group lists them in `wanted`'s order
        pve.post(f"cluster/firewall/groups/{name}", enable=1, comment=f"vmplane {name}", **rule)
    return len(missing), len(extra)


def delete_security_group(pve: Pve, ctx: Context, timeout: float = deletes.TEARDOWN_TIMEOUT) -> None:
    """Rules, then the group; gone is done. A group VM rules still reference is retried until `timeout`
    (the VMs, and their rules, go first in teardown)."""
    ids = pve_ids(ctx.infra)
    name = ids.SecurityGroup or naming.security_group(ctx.job_id)
    found = find_group(pve, name)
    if found is not None and not ownership.owned_by(found.get("comment"), ctx.tagger):
        ctx.log(f"firewall group {name} is not this job's: left as it is")
    elif found is not None:
        reconcile_rules(pve, name, [])
        deletes.delete(
            lambda: pve.delete(f"cluster/firewall/groups/{name}"), what=f"delete firewall group {name}", timeout=timeout
        )
        ctx.log(f"firewall group {name} deleted")
    ids.SecurityGroupCreated = False
    ctx.infra.VMSecurityGroupID = None
    ctx.save()
