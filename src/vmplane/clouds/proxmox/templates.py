"""stepCreateLaunchTemplate on Proxmox: resolve each pool's template VM and version its VM config.

Proxmox has no launch template object: what a new VM of a pool gets is the template VM it is cloned from
plus what vmplane sets (cores, memory, disk size, the cloud-init user-data on its NoCloud ISO). That is
hashed: `LaunchTemplateID[pool] = "<template vmid>@<hash12>"`, and `LaunchTemplateVersion[pool]` goes up
when the hash changes, so VMs cloned from an older config show as outdated (`infra.outdated_vms()`).
vmplane never modifies the user's template; nothing is created on the cluster here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.bootstrap.vmconfig import job_manifest
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.proxmox.spec import pool_options


def pool_user_data(ctx: Context, pool_name: str) -> str:
    """The `#cloud-config` every VM of the pool boots with (the job's recorded vmconfig manifest)."""
    return render_user_data(ctx.spec, pool_name, job_manifest(ctx.spec, pool_name, ctx.vmconfig))


def pool_shape(ctx: Context, pool_name: str) -> dict[str, int]:
    pool = ctx.spec.pools[pool_name]
    options = pool_options(pool)
    return {
        "cores": options.cores,
        "memory": options.memory_mb,
        "diskGb": pool.disk_gb,
    }


def config_hash(ctx: Context, pool_name: str, template_vmid: int) -> str:
    """12 hex digits over everything a new VM of the pool gets (not its tags: those are re-applied in place)."""
    desired: dict[str, Any] = {
        "template": template_vmid,
        **pool_shape(ctx, pool_name),
        "userData": pool_user_data(ctx, pool_name),
    }
    return hashlib.sha256(json.dumps(desired, sort_keys=True).encode()).hexdigest()[:12]


def template_hash(template_id: str) -> str:
    """`"9000@0a1b2c3d4e5f"` -> `"0a1b2c3d4e5f"` (the part cloud-init's instance-id carries)."""
    return template_id.partition("@")[2]


def resolve_template(pve: Pve, pool_name: str, ref: int | str | None) -> tuple[str, int]:
    """(node, vmid) of the pool's template, by VMID or by name, among the cluster's templates."""
    if ref is None:
        raise InvalidRequestError(f"pools.{pool_name}.proxmox.template: name the template VM to clone (VMID or name)")
    templates = [r for r in pve.get("cluster/resources", type="vm") or [] if int(r.get("template") or 0) == 1]
    if isinstance(ref, int) or str(ref).isdigit():
        found = [r for r in templates if int(r["vmid"]) == int(ref)]
    else:
        found = [r for r in templates if r.get("name") == ref]
    if not found:
        raise InvalidRequestError(f"pools.{pool_name}.proxmox.template: no template VM {ref!r} on the cluster")
    if len(found) > 1:
        ids = ", ".join(str(r["vmid"]) for r in found)
        raise InvalidRequestError(
            f"pools.{pool_name}.proxmox.template: {len(found)} templates are named {ref!r} ({ids}); give the VMID"
        )
    return str(found[0]["node"]), int(found[0]["vmid"])


def ensure_templates(pve: Pve, ctx: Context) -> None:
    infra, ids = ctx.infra, pve_ids(ctx.infra)
    for pool_name, pool in ctx.spec.pools.items():
        node, vmid = resolve_template(pve, pool_name, pool_options(pool).template)
        template_id = f"{vmid}@{config_hash(ctx, pool_name, vmid)}"
        version = infra.LaunchTemplateVersion.get(pool_name, 0)
        changed = infra.LaunchTemplateID.get(pool_name) != template_id
        if changed:
            version += 1
        ids.TemplateNode = {**ids.TemplateNode, pool_name: node}
        ids.TemplateVmid = {**ids.TemplateVmid, pool_name: vmid}
        # One assignment each, then one save: a crash leaves the old pair or the new one, never a mix.
        infra.LaunchTemplateID = {**infra.LaunchTemplateID, pool_name: template_id}
        infra.LaunchTemplateVersion = {**infra.LaunchTemplateVersion, pool_name: version}
        ctx.save()
        ctx.log(
            f"pool {pool_name}: template {vmid} on {node}, config {template_id} (v{version}"
            + (", new)" if changed else ")")
        )


def delete_templates(pve: Pve, ctx: Context) -> None:
    """Only the record: the template VM is the user's, and vmplane made nothing for it."""
    ids = pve_ids(ctx.infra)
    ids.TemplateNode, ids.TemplateVmid = {}, {}
    ctx.infra.LaunchTemplateID, ctx.infra.LaunchTemplateVersion = {}, {}
    ctx.save()
    ctx.log("template records cleared (the template VMs are the user's and stay as they are)")
