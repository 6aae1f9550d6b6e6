"""Everything on the cluster still the job's (a clean teardown leaves none; stepUnregisterSpace fails
while any remains): what `resources.TABLE` observes as the job's — VMs whose tags carry the job's token
or that sit in its pool, the pool and the firewall group whose comment carries the job id, the NoCloud
ISOs named for the job's VMIDs, and the SDN objects the record says vmplane meant to make (found by
exact id in the collection, so a made-up or someone else's object is never counted).
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.proxmox import naming
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


def leftovers(pve: Pve, ctx: Context) -> list[Leftover]:
    # Imported here: the table's observers use this module's token helpers (vms.py imports them too).
    from vmplane.clouds.proxmox.resources import TABLE, Reads

    return TABLE.leftovers(Reads(pve), ctx)
