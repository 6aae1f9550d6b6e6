"""Every object kind the Proxmox VE driver makes, declared once (`clouds.resources`): the plan's types,
the leftover scan and drift's observed and extra resources are derived from `TABLE`.

Proxmox has no generated Terraform stack (`vmplane tf generate` covers AWS and GCP): the types are the
bpg/proxmox provider's names that `vmplane plan` shows, so every kind is `in_stack=False`. Observing is
read-only: VMs carrying the job's tag token, sitting in its pool, or recorded with their name; the pool
and the firewall group whose comment carries the job id; the NoCloud ISOs named for the job's VMIDs; the
SDN objects by the exact ids the record holds (a made-up or someone else's object is never counted).
"""

from __future__ import annotations

import threading
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.drift import Observed
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.proxmox import firewall, naming, network, ownership, vms
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.inventory import split_tags
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.resources import ResourceKind, ResourceTable

TF = "proxmox_virtual_environment_"
NO_STACK = "no generated stack on Proxmox (tf generate covers AWS and GCP)"


class Reads:
    """One scan's view of the cluster: `cluster/resources` is read once and shared by the kinds that need
    it (VMs, the ISOs named for their VMIDs, drift's templates), side by side."""

    def __init__(self, pve: Pve) -> None:
        self.pve = pve
        self._vms: list[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def cluster_vms(self) -> list[dict[str, Any]]:
        with self._lock:
            if self._vms is None:
                self._vms = vms.cluster_vms(self.pve)
            return self._vms


def rule_text(rule: dict[str, Any]) -> str:
    """A firewall rule in one comparable line: `IN ACCEPT tcp 80 from 10.60.0.0/24`, `GROUP vmplane-1a2b`;
    a disabled rule says so (it lets nothing in, so a rule vmplane wants but disabled is drift)."""
    kind = str(rule.get("type", "")).upper()
    if kind == "GROUP":
        head = f"GROUP {rule.get('action')}"
    else:
        parts = [kind, str(rule.get("action", "")).upper(), rule.get("proto"), rule.get("dport")]
        head = " ".join(str(p) for p in parts if p)
        head += f" from {rule.get('source')}" if rule.get("source") else ""
    return head if int(rule.get("enable", 0) or 0) == 1 else f"{head} (disabled)"  # as reconcile_rules reads it


def _token_tags(text: Any) -> dict[str, str]:
    return {t: "" for t in split_tags(text)}


# ---- observe -------------------------------------------------------------------------------------


def observe_vms(reads: Reads, ctx: Context) -> list[Observed]:
    out = []
    for vm in (r for r in reads.cluster_vms() if vms.owned(ctx, r)):
        vmid, node = str(vm["vmid"]), str(vm["node"])
        path = f"nodes/{node}/qemu/{vmid}/firewall"
        try:
            options = reads.pve.get(f"{path}/options") or {}
            rules = reads.pve.get(f"{path}/rules") or []
        except NotFoundError:  # destroyed between the listing and these reads
            continue
        fields = {
            "status": str(vm.get("status") or ""),
            "node": node,
            "firewall.enable": int(options.get("enable") or 0) == 1,
            "firewall.policy_in": str(options.get("policy_in") or ""),
            "firewall.rules": sorted(rule_text(r) for r in rules),
        }
        out.append(Observed("vm", vmid, str(vm.get("name") or ""), _token_tags(vm.get("tags")), fields))
    return out


def job_vmids(reads: Reads, ctx: Context) -> set[str]:
    ids = pve_ids(ctx.infra)
    listed = {str(r["vmid"]) for r in reads.cluster_vms() if vms.owned(ctx, r)}
    return listed | set(ids.Vmids) | {str(v.ID) for v in ctx.infra.VMs if v.ID}


def observe_isos(reads: Reads, ctx: Context) -> list[Observed]:
    """The recorded ISOs and those named for the job's VMIDs, on every node's copy of the ISO storage."""
    ids = pve_ids(ctx.infra)
    if not ids.IsoStorage:
        return []
    names = {f"iso/{naming.iso_name(int(v))}" for v in job_vmids(reads, ctx) if v.isdigit()}
    recorded = set(ids.Isos.values())
    found: dict[str, list[str]] = {}  # volid -> the nodes holding it (a storage may be per node)
    for node in reads.pve.nodes:
        try:
            content = reads.pve.get(f"nodes/{node}/storage/{ids.IsoStorage}/content", content="iso") or []
        except NotFoundError:
            continue
        for volume in content:
            volid = str(volume.get("volid", ""))
            if volid in recorded or volid.partition(":")[2] in names:
                found.setdefault(volid, []).append(node)
    return [Observed("iso", v, v.rpartition("/")[2], {}, {"nodes": n}) for v, n in sorted(found.items())]


def observe_group(reads: Reads, ctx: Context) -> list[Observed]:
    name = naming.security_group(ctx.job_id)
    group = firewall.find_group(reads.pve, name)
    if group is None or not ownership.owned_by(group.get("comment"), ctx.tagger):
        return []
    rules = sorted(rule_text(r) for r in firewall.group_rules(reads.pve, name))
    return [Observed("security-group", name, name, ownership.tags_of_comment(group.get("comment")), {"rules": rules})]


def observe_pool(reads: Reads, ctx: Context) -> list[Observed]:
    name = pve_ids(ctx.infra).Pool or naming.pool_id(ctx.spec, ctx.job_id)
    pool = ownership.find_pool(reads.pve, name)
    if pool is None or not ownership.owned_by(pool.get("comment"), ctx.tagger):
        return []
    return [Observed("pool", name, name, ownership.tags_of_comment(pool.get("comment")))]


def observe_subnet(reads: Reads, ctx: Context) -> list[Observed]:
    ids = pve_ids(ctx.infra)
    if not (ids.VNet and ids.Subnet):
        return []
    found = network.listed(reads.pve, f"cluster/sdn/vnets/{ids.VNet}/subnets", "subnet", ids.Subnet)
    if found is None:
        return []
    fields = {
        "snat": int(found.get("snat") or 0) == 1,
        "gateway": found.get("gateway"),
        "cidr": found.get("cidr"),
    }
    return [Observed("sdn-subnet", ids.Subnet, ids.Subnet, {}, fields)]


def observe_vnet(reads: Reads, ctx: Context) -> list[Observed]:
    vnet = pve_ids(ctx.infra).VNet
    found = network.listed(reads.pve, "cluster/sdn/vnets", "vnet", vnet) if vnet else None
    return [] if found is None or vnet is None else [Observed("sdn-vnet", vnet, vnet, {}, {"zone": found.get("zone")})]


def observe_zone(reads: Reads, ctx: Context) -> list[Observed]:
    zone = pve_ids(ctx.infra).Zone
    found = network.listed(reads.pve, "cluster/sdn/zones", "zone", zone) if zone else None
    return [] if found is None or zone is None else [Observed("sdn-zone", zone, zone, {}, {"type": found.get("type")})]


# ---- delete (drift's extras) ---------------------------------------------------------------------


def delete_vm(reads: Reads, ctx: Context, vmid: str) -> None:
    """Stopped and destroyed with purge, then the ISO named for its VMID; gone is done."""
    live = vms.by_vmid(vms.cluster_vms(reads.pve), vmid)
    if live is not None:
        vms.destroy(reads.pve, str(live["node"]), vmid, str(live.get("name") or vmid))
    if vmid.isdigit():
        vms.delete_isos_named(reads.pve, {vms.iso_volume(ctx, int(vmid))})


def delete_iso(reads: Reads, ctx: Context, volid: str) -> None:
    vms.delete_isos_named(reads.pve, {volid})


TABLE: ResourceTable[Reads] = ResourceTable(
    "proxmox",
    (
        ResourceKind(
            "vm",
            TF + "vm",
            "stepCreateVMs",
            "stepTerminateVMs",
            role="vm",
            observe=observe_vms,
            delete=delete_vm,
            in_stack=False,
            note="tags: the job's tokens (naming.tag_tokens), the full set in the description; " + NO_STACK,
        ),
        ResourceKind(
            "iso",
            TF + "file",
            "stepCreateVMs",
            "stepTerminateVMs",
            observe=observe_isos,
            delete=delete_iso,
            in_stack=False,
            note="a storage volume takes no tags: found by the name it has for the VMID (naming.iso_name)",
        ),
        ResourceKind(
            "security-group",
            TF + "cluster_firewall_security_group",
            "stepCreateNetwork",
            "stepDeleteSecurityGroup",
            role="firewall",
            observe=observe_group,
            in_stack=False,
            note="the tag set is JSON in its one-line comment (ownership.comment); " + NO_STACK,
        ),
        ResourceKind(
            "sdn-subnet",
            TF + "sdn_subnet",
            "stepCreateNetwork",
            "stepDeleteNetwork",
            observe=observe_subnet,
            in_stack=False,
            note="SDN objects take no tags: their ids derive from the job (naming) and the record holds them",
        ),
        ResourceKind(
            "sdn-vnet",
            TF + "sdn_vnet",
            "stepCreateNetwork",
            "stepDeleteNetwork",
            observe=observe_vnet,
            in_stack=False,
            note="no tags (see sdn-subnet); its alias names the job",
        ),
        ResourceKind(
            "sdn-zone",
            TF + "sdn_zone_simple",
            "stepCreateNetwork",
            "stepDeleteNetwork",
            observe=observe_zone,
            in_stack=False,
            note="no tags (see sdn-subnet)",
        ),
        ResourceKind(
            "sdn-applier",
            TF + "sdn_applier",
            "stepCreateNetwork",
            "stepDeleteNetwork",
            in_stack=False,
            note="PUT /cluster/sdn: applies the pending SDN config; an action, no object to observe",
        ),
        ResourceKind(
            "pool",
            TF + "pool",
            "stepCreateNetwork",
            "stepDeleteNetwork",
            role="pool",
            observe=observe_pool,
            in_stack=False,
            note="the tag set is JSON in its comment; deleted last, once its VMs are gone",
        ),
        ResourceKind(
            "template",
            "data." + TF + "vm",
            "stepCreateLaunchTemplate",
            "stepDeleteLaunchTemplate",
            in_stack=False,
            direct=False,
            note="the user's template VM: read (drift reports it missing), never made, changed or deleted",
        ),
    ),
)
