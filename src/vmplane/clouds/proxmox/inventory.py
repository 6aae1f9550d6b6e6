"""Everything on the cluster still the job's (a clean teardown leaves none; stepUnregisterSpace fails
while any remains): VMs whose tags carry the job's token or that sit in its pool, the pool and the
firewall group whose comment carries the job id, the NoCloud ISOs named for the job's VMIDs, and the SDN
objects the record says vmplane meant to make (their ids derive from the job; found by exact id in the
collection, so a made-up or someone else's object is never counted).
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.proxmox import firewall, naming, network, ownership
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve


def job_token(ctx: Context) -> str:
    """The one tag token every VM of the job carries (`<prefix>jobId` folded, then its value)."""
    return naming.tag_tokens({ctx.tagger.job_key: ctx.tagger.job_id})[0]


def split_tags(text: Any) -> list[str]:
    """PVE lists tags separated by `;` (it also accepts `,` and spaces on input)."""
    return [t for t in str(text or "").replace(",", ";").replace(" ", ";").split(";") if t]


def job_vms(pve: Pve, ctx: Context) -> list[dict[str, Any]]:
    """`cluster/resources` entries of the job's VMs: by tag token, or by membership of the job's pool."""
    token = job_token(ctx)
    pool = pve_ids(ctx.infra).Pool or naming.pool_id(ctx.spec, ctx.job_id)
    return [
        vm
        for vm in pve.get("cluster/resources", type="vm") or []
        if vm.get("type") == "qemu" and (token in split_tags(vm.get("tags")) or vm.get("pool") == pool)
    ]


def _isos(pve: Pve, ctx: Context, vmids: set[str]) -> list[Leftover]:
    ids = pve_ids(ctx.infra)
    if not ids.IsoStorage:
        return []
    names = {f"iso/{naming.iso_name(int(v))}" for v in vmids if v.isdigit()}
    recorded = set(ids.Isos.values())
    found: set[str] = set()
    for node in pve.nodes:
        try:
            content = pve.get(f"nodes/{node}/storage/{ids.IsoStorage}/content", content="iso") or []
        except NotFoundError:
            continue
        for volume in content:
            volid = str(volume.get("volid", ""))
            if volid in recorded or volid.partition(":")[2] in names:
                found.add(volid)
    return [Leftover("iso", v) for v in sorted(found)]


def _sdn(pve: Pve, ctx: Context) -> list[Leftover]:
    ids, out = pve_ids(ctx.infra), []
    if ids.VNet and ids.Subnet and network.listed(pve, f"cluster/sdn/vnets/{ids.VNet}/subnets", "subnet", ids.Subnet):
        out.append(Leftover("sdn-subnet", ids.Subnet))
    if ids.VNet and network.listed(pve, "cluster/sdn/vnets", "vnet", ids.VNet):
        out.append(Leftover("sdn-vnet", ids.VNet))
    if ids.Zone and network.listed(pve, "cluster/sdn/zones", "zone", ids.Zone):
        out.append(Leftover("sdn-zone", ids.Zone))
    return out


def leftovers(pve: Pve, ctx: Context) -> list[Leftover]:
    ids = pve_ids(ctx.infra)
    vms = job_vms(pve, ctx)
    out = [Leftover("vm", f"{vm.get('vmid')} ({vm.get('name', '?')} on {vm.get('node', '?')})") for vm in vms]
    vmids = {str(vm.get("vmid")) for vm in vms} | set(ids.Vmids) | {str(v.ID) for v in ctx.infra.VMs if v.ID}
    out += _isos(pve, ctx, vmids)
    name = naming.security_group(ctx.job_id)
    group = firewall.find_group(pve, name)
    if group is not None and ownership.owned_by(group.get("comment"), ctx.tagger):
        out.append(Leftover("security-group", name))
    out += _sdn(pve, ctx)
    pool_name = ids.Pool or naming.pool_id(ctx.spec, ctx.job_id)
    pool = ownership.find_pool(pve, pool_name)
    if pool is not None and ownership.owned_by(pool.get("comment"), ctx.tagger):
        out.append(Leftover("pool", pool_name))
    return out
