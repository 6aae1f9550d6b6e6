"""The environment's PVE pool (one per environment: made in stepCreateNetwork, removed last), and how a
pool or firewall group says whose it is.

Pools and cluster firewall groups take no tags, only a one-line comment (a firewall group's comment
must not hold a line feed; a pool's is one field of user.cfg): it carries the tag set as JSON after
`vmplane `, and the job id in it is what "ours" means. VMs carry tag tokens and the full set in their
description (naming.description).
"""

from __future__ import annotations

import json
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import ConflictError
from vmplane.clouds.proxmox import naming
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve

COMMENT_PREFIX = "vmplane "


def comment(tags: dict[str, str]) -> str:
    return COMMENT_PREFIX + json.dumps(tags, sort_keys=True, separators=(",", ":"))


def tags_of_comment(text: str | None) -> dict[str, str]:
    """The tag set a comment (ours, one line) or a VM description (naming.description) carries; {} if none."""
    if text and text.startswith(COMMENT_PREFIX):
        try:
            data = json.loads(text[len(COMMENT_PREFIX) :])
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return naming.tags_from_description(text)


def owned_by(text: str | None, tagger: Tagger) -> bool:
    return tags_of_comment(text).get(tagger.job_key) == tagger.job_id


def owner_of(text: str | None, tagger: Tagger) -> str:
    """Who owns an object, in words for a conflict error."""
    tags = tags_of_comment(text)
    if not tags:
        return "not vmplane (no vmplane comment)"
    return f"org {tags.get(f'{tagger.prefix}orgId', '?')}, job {tags.get(tagger.job_key, '?')}"


def find_pool(pve: Pve, name: str) -> dict[str, Any] | None:
    """The pool's entry in `GET /pools` (every PVE version lists `poolid` and `comment` there)."""
    return next((p for p in pve.get("pools") or [] if p.get("poolid") == name), None)


def ensure_pool(pve: Pve, ctx: Context) -> None:
    ids = pve_ids(ctx.infra)
    name = naming.pool_id(ctx.spec, ctx.job_id)
    found = find_pool(pve, name)
    if found is not None and not owned_by(found.get("comment"), ctx.tagger):
        raise ConflictError(
            f"PVE pool {name} already exists and belongs to {owner_of(found.get('comment'), ctx.tagger)}",
            code="AlreadyExists",
        )
    ids.Pool = name
    ctx.save()  # intent first: the pool is created with our comment, so a re-run finds it as ours
    wanted = comment(ctx.tagger.tags("pool", name))
    if found is None:
        pve.post("pools", poolid=name, comment=wanted)
        ctx.log(f"pool {name} created")
    elif found.get("comment") != wanted:
        pve.put(f"pools/{name}", comment=wanted)
    ids.PoolCreated = True
    ctx.save()


def delete_pool(pve: Pve, ctx: Context, timeout: float = deletes.TEARDOWN_TIMEOUT) -> None:
    """After the VMs: a pool that still has members ("is not empty") is retried until `timeout`."""
    ids = pve_ids(ctx.infra)
    name = ids.Pool or naming.pool_id(ctx.spec, ctx.job_id)
    found = find_pool(pve, name)
    if found is not None and not owned_by(found.get("comment"), ctx.tagger):
        ctx.log(f"pool {name} is not this job's ({owner_of(found.get('comment'), ctx.tagger)}): left as it is")
    elif found is not None:
        deletes.delete(lambda: pve.delete(f"pools/{name}"), what=f"delete pool {name}", timeout=timeout)
        ctx.log(f"pool {name} deleted")
    ids.PoolCreated = False
    ctx.save()
