"""A change of the spec's `tags` applied in place (the contract of clouds/aws/retag.py): the job's VMs get
the new tag tokens and the full set in their description, the pool and the firewall group the new set in
their comment. Tokens a VM carries that did not come from the old tag set (a user's own) are kept, and
so are the description's lines after the tag set. SDN objects take no tags (their ids say whose they are).
Only the user's tags change, never the job id, so ownership stays exact.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox import firewall, naming, ownership
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.inventory import job_vms, split_tags
from vmplane.clouds.proxmox.session import Pve


def _extra_lines(description: str) -> str:
    """What the description holds besides the header and the `key=value` lines."""
    if naming.DESCRIPTION_HEADER not in description:
        return description.strip()
    body = description.split(naming.DESCRIPTION_HEADER, 1)[1]
    return "\n".join(line for line in body.splitlines() if line.strip() and "=" not in line)


def retag_vms(pve: Pve, ctx: Context) -> int:
    count = 0
    for vm in job_vms(pve, ctx):
        path = f"nodes/{vm['node']}/qemu/{vm['vmid']}/config"
        config = pve.get(path) or {}
        old_description = str(config.get("description") or "")
        old = naming.tags_from_description(old_description)
        role = old.get(ctx.tagger.role_key) or "vm"
        tags = ctx.tagger.tags(role, str(config.get("name") or vm.get("name") or ""))
        own = set(split_tags(config.get("tags"))) - set(naming.tag_tokens(old))
        tokens = ";".join(sorted(own | set(naming.tag_tokens(tags))))
        description = naming.description(tags, _extra_lines(old_description))
        count += 1
        if tokens != ";".join(sorted(split_tags(config.get("tags")))) or description != old_description:
            pve.put(path, tags=tokens, description=description)
    return count


def retag(pve: Pve, ctx: Context) -> None:
    ids = pve_ids(ctx.infra)
    count = retag_vms(pve, ctx)
    pool_name = ids.Pool or naming.pool_id(ctx.spec, ctx.job_id)
    pool = ownership.find_pool(pve, pool_name)
    if pool is not None and ownership.owned_by(pool.get("comment"), ctx.tagger):
        wanted = ownership.comment(ctx.tagger.tags("pool", pool_name))
        if pool.get("comment") != wanted:
            pve.put(f"pools/{pool_name}", comment=wanted)
        count += 1
    group_name = ids.SecurityGroup or naming.security_group(ctx.job_id)
    group = firewall.find_group(pve, group_name)
    if group is not None and ownership.owned_by(group.get("comment"), ctx.tagger):
        wanted = ownership.comment(ctx.tagger.tags("firewall", group_name))
        if group.get("comment") != wanted:
            pve.post("cluster/firewall/groups", group=group_name, rename=group_name, comment=wanted)
        count += 1
    ctx.log(f"tags updated on {count} objects: {', '.join(sorted(ctx.spec.tags)) or 'no user tags'}")
