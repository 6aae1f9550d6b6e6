"""stepValidate's checks against the cluster; creates nothing (only GETs): the nodes are in the cluster
and online, the token holds every privilege vmplane needs, each pool's template resolves to a template
VM with the guest agent on, a file storage takes `iso` content on every node, an existing network is
a bridge or VNet with a known range, and no object with the job's names is someone else's. Each refusal
names the spec field (or the token) it is about. The datacenter firewall being off is a warning only.
"""

from __future__ import annotations

import re
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import AuthError, ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.proxmox import firewall, naming, network, ownership, privileges
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import TOKEN_ID_ENV, Pve
from vmplane.clouds.proxmox.spec import pool_options

PREFERRED_ISO_STORAGE = "local"  # PVE's default directory storage; any other iso-capable one will do


def placement_field(ctx: Context) -> str:
    return "provider.node" if getattr(ctx.spec.provider, "node", None) else "provider.nodes"


def check_nodes(pve: Pve, ctx: Context) -> None:
    status = {str(n.get("node")): str(n.get("status", "")) for n in pve.get("nodes") or []}
    for node in pve.nodes:
        if node not in status:
            known = ", ".join(sorted(status)) or "none"
            raise InvalidRequestError(f"{placement_field(ctx)}: {node} is not a node of the cluster (nodes: {known})")
        if status[node] != "online":
            raise InvalidRequestError(f"{placement_field(ctx)}: node {node} is {status[node] or 'not online'}")


def check_privileges(pve: Pve) -> None:
    held = pve.get("access/permissions") or {}
    missing = privileges.missing(held)
    if missing:
        where = ", ".join(f"{p} on {privileges.acl_path(p)}" for p in missing)
        raise AuthError(
            f"the API token ({TOKEN_ID_ENV}) lacks {where}; `vmplane proxmox init-node` makes a role with "
            "exactly the privileges vmplane needs and a token holding it",
            code="MissingPrivileges",
        )


def agent_enabled(value: Any) -> bool:
    """`agent` is `1`, `enabled=1,fstrim_cloned_disks=1`, `1,type=virtio`, ...: the first or `enabled` key."""
    for part in str(value or "0").split(","):
        key, sep, val = part.partition("=")
        if not sep:
            return key.strip() == "1"
        if key.strip() == "enabled":
            return val.strip() == "1"
    return False


def resolve_template(pve: Pve, ctx: Context, pool_name: str, vms: list[dict[str, Any]]) -> dict[str, Any]:
    """The template VM a pool names (VMID or name) among `cluster/resources` VMs, on a placement node."""
    ref = pool_options(ctx.spec.pools[pool_name]).template
    field = f"pools.{pool_name}.proxmox.template"
    if ref is None:
        raise InvalidRequestError(f"{field}: required on Proxmox (the VMID or name of the template VM to clone)")
    by_id = isinstance(ref, int) or str(ref).isdigit()
    found = [v for v in vms if (int(v.get("vmid", 0)) == int(ref) if by_id else v.get("name") == ref)]
    if not found:
        raise InvalidRequestError(f"{field}: no VM {ref} in the cluster (`vmplane proxmox init-node` makes one)")
    templates = [v for v in found if int(v.get("template", 0) or 0) == 1]
    if not templates:
        raise InvalidRequestError(f"{field}: VM {ref} is not a template (`qm template {found[0].get('vmid')}`)")
    if len(templates) > 1:
        ids = ", ".join(str(v.get("vmid")) for v in templates)
        raise InvalidRequestError(f"{field}: the name {ref} is shared by templates {ids}; give the VMID")
    vm = templates[0]
    if vm.get("node") not in pve.nodes:
        raise InvalidRequestError(
            f"{field}: template {vm.get('vmid')} is on node {vm.get('node')}, not one of {', '.join(pve.nodes)}"
        )
    config = pve.get(f"nodes/{vm['node']}/qemu/{vm['vmid']}/config") or {}
    if not agent_enabled(config.get("agent")):
        raise InvalidRequestError(
            f"{field}: template {vm['vmid']} has the QEMU guest agent off; vmplane reaches the VMs only through "
            f"it (`qm set {vm['vmid']} --agent enabled=1`, and qemu-guest-agent installed in the image)"
        )
    warn_local_template(pve, ctx, pool_name, vm, config)
    return vm


_DISK_KEY = re.compile(r"^(scsi|virtio|sata|ide|efidisk|tpmstate)\d+$")


def warn_local_template(pve: Pve, ctx: Context, pool_name: str, vm: dict[str, Any], config: dict[str, Any]) -> None:
    """PVE clones to another node (`target`) only a VM whose disks are all on shared storage ("can't clone
    VM to node ... (VM uses local storage)"); fakepve does not refuse it. A note, so whoever spreads VMs
    over several nodes knows before the clone fails; one node, or a template on shared storage, avoids it."""
    size = int(getattr(ctx.spec.pools[pool_name], "size", 1))
    others = sorted({pve.nodes[i % len(pve.nodes)] for i in range(size)} - {str(vm["node"])})
    if not others:  # every VM lands on the template's node (spread in order, as compute places them)
        return
    shared = {str(s.get("storage")): int(s.get("shared", 0) or 0) == 1 for s in pve.get(f"nodes/{vm['node']}/storage")}
    local = sorted(
        {
            str(value).split(":", 1)[0]
            for key, value in config.items()
            if _DISK_KEY.match(key) and ":" in str(value) and "media=cdrom" not in str(value)
        }
        - {name for name, is_shared in shared.items() if is_shared}
    )
    if local:
        note = (
            f"pools.{pool_name}.proxmox.template: template {vm['vmid']} has disks on local storage "
            f"({', '.join(local)}) of node {vm['node']}; Proxmox VE clones to other nodes only from shared storage, "
            f"so VMs placed on "
            f"{', '.join(others)} may fail to clone"
        )
        ctx.log(f"warning: {note}")
        ctx.notes.append(note)


def pick_iso_storage(pve: Pve, ctx: Context) -> str:
    """A storage id that takes `iso` content and is active on every node (the NoCloud ISOs go there)."""
    common: set[str] | None = None
    for node in pve.nodes:
        stores = pve.get(f"nodes/{node}/storage", content="iso") or []
        usable = {
            str(s["storage"])
            for s in stores
            if "iso" in str(s.get("content", "")).split(",")
            and int(s.get("active", 0) or 0) == 1
            and int(s.get("enabled", 1) or 0) == 1
        }
        common = usable if common is None else common & usable
    if not common:
        raise InvalidRequestError(
            f"{placement_field(ctx)}: no storage takes iso content and is active on every node "
            f"({', '.join(pve.nodes)}); vmplane uploads each VM's cloud-init ISO there (a directory storage such "
            "as `local` with content iso)"
        )
    return PREFERRED_ISO_STORAGE if PREFERRED_ISO_STORAGE in common else sorted(common)[0]


def check_names(pve: Pve, ctx: Context) -> None:
    """The names the job would create are free or already this job's."""
    ids = pve_ids(ctx.infra)
    pool = ownership.find_pool(pve, naming.pool_id(ctx.spec, ctx.job_id))
    if pool is not None and not ownership.owned_by(pool.get("comment"), ctx.tagger):
        raise ConflictError(
            f"PVE pool {pool['poolid']} exists and belongs to {ownership.owner_of(pool.get('comment'), ctx.tagger)}",
            code="AlreadyExists",
        )
    group = firewall.find_group(pve, naming.security_group(ctx.job_id))
    if group is not None and not ownership.owned_by(group.get("comment"), ctx.tagger):
        raise ConflictError(
            f"cluster firewall group {group['group']} exists and belongs to "
            f"{ownership.owner_of(group.get('comment'), ctx.tagger)}",
            code="AlreadyExists",
        )
    if ctx.spec.network.existing_network:
        return
    for path, key, name, recorded in (
        ("cluster/sdn/zones", "zone", naming.zone_id(ctx.job_id), ids.Zone),
        ("cluster/sdn/vnets", "vnet", naming.vnet_id(ctx.job_id), ids.VNet),
    ):
        if recorded is None and network.listed(pve, path, key, name) is not None:
            raise ConflictError(
                f"SDN {key} {name} exists and vmplane did not make it for this job", code="AlreadyExists"
            )


def warn_cluster_firewall(pve: Pve, ctx: Context) -> None:
    """VM firewall rules only apply while the datacenter firewall is on; vmplane never turns it on."""
    try:
        options = pve.get("cluster/firewall/options") or {}
    except NotFoundError:
        options = {}
    off = int(options.get("enable", 0) or 0) != 1
    pve_ids(ctx.infra).ClusterFirewallOff = off
    if off:
        note = (
            "the datacenter firewall is off (Datacenter > Firewall > Options > Firewall), so the VMs' firewall "
            "rules do not apply yet; vmplane never turns it on (with its default input policy DROP that can lock "
            "you out of the cluster): allow the web UI and SSH first, then enable it"
        )
        ctx.log(f"warning: {note}")
        ctx.notes.append(note)


def preflight(pve: Pve, ctx: Context) -> None:
    ids = pve_ids(ctx.infra)
    check_nodes(pve, ctx)
    check_privileges(pve)
    vms = list(pve.get("cluster/resources", type="vm") or [])
    for pool_name in ctx.spec.pools:
        vm = resolve_template(pve, ctx, pool_name, vms)
        ids.TemplateNode[pool_name], ids.TemplateVmid[pool_name] = str(vm["node"]), int(vm["vmid"])
    ids.IsoStorage = pick_iso_storage(pve, ctx)
    if ctx.spec.network.existing_network:
        network.existing_sources(pve, ctx.spec, pve.nodes)
    check_names(pve, ctx)
    warn_cluster_firewall(pve, ctx)
    ctx.infra.Region = ",".join(pve.nodes)
    ctx.infra.ExecMode = ctx.spec.exec_mode.value
    ctx.save()
    ctx.log(
        f"{pve.target.describe()}: nodes online, token privileges held, templates "
        + ", ".join(f"{p}={v}" for p, v in sorted(ids.TemplateVmid.items()))
        + f", ISOs on {ids.IsoStorage}"
    )
