"""Drift on Proxmox VE: what the spec and the record say the cluster holds (`Expected`), what it holds
(`resources.TABLE.observe`, plus the templates the pools clone), compared (`clouds.drift.compare`).
Read-only: GETs only, nothing saved.

Compared per kind: a VM's power state (stopped only while the record lists its pool in StoppedPools;
Proxmox has no `vmplane stop` yet, it needs schedules, so "running" in practice), its
tag tokens (the job's; a token someone added is not drift), its own firewall (on, inbound DROP, only
the group rule); the firewall group's rules (as sorted lines) and the tag set in its comment, the pool's
comment; the SDN subnet's SNAT flag (the NAT out through the node), gateway and range; the VNet's zone;
each VM's NoCloud ISO. The template VMs are the user's: a missing one is reported, never repaired.
Extras: a VM carrying the job's token (or in its pool) that the record does not hold, an ISO named for
a job VMID that no VM records.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.drift import Drift, Expected, Observed, compare
from vmplane.clouds.proxmox import firewall, naming
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.resources import TABLE, Reads, rule_text
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.proxmox.spec import pool_options
from vmplane.state import VMState

EXTRA_KINDS = ("vm", "iso")  # found by the job's tag token or VMIDs; every other kind has one job-derived id


def address(kind: str, name: str) -> str:
    return TABLE.kind(kind).address(name)


def expected_vms(ctx: Context) -> list[Expected]:
    infra = ctx.infra
    group = infra.VMSecurityGroupID
    out = []
    for rec in infra.VMs:
        if not rec.ID or rec.Index < 0 or rec.State is VMState.terminated:
            continue
        tokens = naming.tag_tokens(ctx.tagger.tags("vm", rec.Name))
        fields: dict[str, object] = {
            "status": "stopped" if rec.Pool in infra.StoppedPools else "running",
            "firewall.enable": True,
            "firewall.policy_in": "DROP",
            "firewall.rules": [rule_text({"type": "group", "action": group, "enable": 1})] if group else [],
        }
        out.append(
            Expected(
                address("vm", rec.Name),
                "vm",
                id=rec.ID,
                name=rec.Name,
                fields=fields,
                tags={t: "" for t in tokens},
                repair_missing=f"cloned again as {rec.Name} with VMID {rec.ID} (stepCreateVMs)",
                repair_changed="started, its tag tokens and its firewall set back",
            )
        )
    return out


def expected_isos(ctx: Context) -> list[Expected]:
    ids = pve_ids(ctx.infra)
    names = {v.Name for v in ctx.infra.VMs if v.ID and v.State is not VMState.terminated}
    return [
        Expected(
            address("iso", volid.rpartition("/")[2]),
            "iso",
            id=volid,
            repair_missing=f"uploaded again for {vm_name} (stepCreateVMs)",
        )
        for vm_name, volid in sorted(ids.Isos.items())
        if vm_name in names
    ]


def expected_network(ctx: Context) -> list[Expected]:
    ids, out = pve_ids(ctx.infra), []
    if ids.PoolCreated and ids.Pool:
        out.append(
            Expected(
                address("pool", ids.Pool),
                "pool",
                id=ids.Pool,
                tags=ctx.tagger.tags("pool", ids.Pool),
                repair_missing="created again (stepCreateNetwork); its VMs join it when cloned again",
                repair_changed="its comment (the tag set) set back",
            )
        )
    if ids.ZoneCreated and ids.Zone:
        out.append(Expected(address("sdn-zone", ids.Zone), "sdn-zone", id=ids.Zone))
    if ids.VNetCreated and ids.VNet:
        out.append(Expected(address("sdn-vnet", ids.VNet), "sdn-vnet", id=ids.VNet, fields={"zone": ids.Zone}))
    if ids.SubnetCreated and ids.Subnet:
        out.append(
            Expected(
                address("sdn-subnet", ids.Subnet),
                "sdn-subnet",
                id=ids.Subnet,
                fields={"snat": True, "gateway": ids.Gateway, "cidr": ids.SubnetCidr},
                repair_missing="created again with SNAT and applied (stepCreateNetwork)",
                repair_changed="SNAT and its gateway set back, then the SDN config applied",
            )
        )
    if ids.SecurityGroupCreated and ids.SecurityGroup:
        name = ids.SecurityGroup
        out.append(
            Expected(
                address("security-group", name),
                "security-group",
                id=name,
                fields={"rules": sorted(rule_text({**r, "enable": 1}) for r in firewall.desired_rules(ctx))},
                tags=ctx.tagger.tags("firewall", name),
                repair_missing="created again with its rules (stepCreateNetwork)",
                repair_changed="rules not in the file deleted, missing ones added, its comment set back",
            )
        )
    return out


def expected_templates(ctx: Context) -> list[Expected]:
    """The template VM each pool clones: the user's (owned=False), so a deleted one is only reported."""
    ids = pve_ids(ctx.infra)
    out = []
    for pool_name in ctx.spec.pools:
        vmid = ids.TemplateVmid.get(pool_name)
        if vmid is None:
            continue
        ref = pool_options(ctx.spec.pools[pool_name]).template
        out.append(
            Expected(
                address("template", str(ref if ref is not None else vmid)),
                "template",
                id=str(vmid),
                fields={"template": True},
                owned=False,
            )
        )
    return out


def observed_templates(reads: Reads, ctx: Context) -> list[Observed]:
    wanted = {str(v) for v in pve_ids(ctx.infra).TemplateVmid.values()}
    return [
        Observed(
            "template", str(r["vmid"]), str(r.get("name") or ""), {}, {"template": int(r.get("template") or 0) == 1}
        )
        for r in reads.cluster_vms()
        if str(r.get("vmid")) in wanted
    ]


def expected(ctx: Context) -> list[Expected]:
    return [*expected_network(ctx), *expected_templates(ctx), *expected_vms(ctx), *expected_isos(ctx)]


def observe(pve: Pve, ctx: Context) -> list[Observed]:
    reads = Reads(pve)
    return [*TABLE.observe(reads, ctx), *observed_templates(reads, ctx)]


def drift(pve: Pve, ctx: Context) -> list[Drift]:
    return compare(expected(ctx), observe(pve, ctx), extra_kinds=EXTRA_KINDS, address=address)
