"""One Proxmox VM of a Fixed pool: found, cloned, configured, behind its firewall, with its NoCloud ISO;
and destroyed. `compute.py` runs these over the pools; every function converges when run again.

Whose a VM is: its name plus one of the job's tag token, membership of the env's PVE pool, or a VMID
the job recorded before the clone (a clone has no tags until it is configured; it joins the pool at the
end of the clone task; its VMID is recorded first).
"""

from __future__ import annotations

import io
import re
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.deletes import delete
from vmplane.clouds.errors import CloudError, ConflictError, NotFoundError
from vmplane.clouds.proxmox import naming
from vmplane.clouds.proxmox.cloudinit_iso import DHCP_NETWORK_CONFIG, meta_data, nocloud_iso
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.inventory import job_token, split_tags
from vmplane.clouds.proxmox.session import TASK_TIMEOUT, Pve
from vmplane.clouds.proxmox.templates import pool_shape, pool_user_data, template_hash
from vmplane.clouds.waits import poll
from vmplane.state import VMRecord

CDROM = "ide3"  # ide2 is where PVE puts its own cloud-init drive: left free for a template that has one
DEFAULT_ISO_STORAGE = "local"
_SIZE = re.compile(r"(?:^|,)size=(\d+(?:\.\d+)?)([KMGT]?)")
_UNITS = {"": 1 / 1024**3, "K": 1 / 1024**2, "M": 1 / 1024, "G": 1, "T": 1024}


class NamedBytes(io.BytesIO):
    """An upload body with a file name: proxmoxer sends a file object as multipart, named by `.name`."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(data)
        self.name = name


def tag_set(resource: dict[str, Any]) -> set[str]:
    return set(split_tags(resource.get("tags")))


def cluster_vms(pve: Pve) -> list[dict[str, Any]]:
    return [r for r in pve.get("cluster/resources", type="vm") or [] if r.get("type", "qemu") == "qemu"]


def owned(ctx: Context, resource: dict[str, Any]) -> bool:
    """A recorded VMID alone is not enough: someone may have taken it after a crash before our clone,
    so it counts only with one of the job's VM names on it."""
    ids = pve_ids(ctx.infra)
    if int(resource.get("template") or 0) == 1:
        return False
    recorded = str(resource.get("vmid")) in ids.Vmids and resource.get("name") in {v.Name for v in ctx.infra.VMs}
    return (
        recorded or job_token(ctx) in tag_set(resource) or (ids.Pool is not None and resource.get("pool") == ids.Pool)
    )


def job_vms(pve: Pve, ctx: Context) -> list[dict[str, Any]]:
    """Every VM of this job on the cluster (recorded or not)."""
    return [r for r in cluster_vms(pve) if owned(ctx, r)]


def by_vmid(listing: list[dict[str, Any]], vmid: str | None) -> dict[str, Any] | None:
    return next((r for r in listing if vmid is not None and str(r.get("vmid")) == vmid), None)


def find_vm(ctx: Context, listing: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The job's VM named `name` (a VM of that name that is someone else's is left alone: PVE names need not
    be unique, and preflight reports the clash)."""
    named = [r for r in listing if r.get("name") == name and int(r.get("template") or 0) != 1]
    mine = [r for r in named if owned(ctx, r)]
    if len(mine) > 1:
        ids = ", ".join(str(r["vmid"]) for r in mine)
        raise ConflictError(f"VM name {name} is on {len(mine)} of this job's VMs ({ids}): delete the extra ones")
    return mine[0] if mine else None


def template_on_shared_storage(pve: Pve, node: str, vmid: int) -> bool:
    """Whether every disk of the template sits on shared storage (a clone may then target another node)."""
    config = pve.get(f"nodes/{node}/qemu/{vmid}/config")
    storages = {
        str(v).split(":", 1)[0]
        for k, v in config.items()
        if re.fullmatch(r"(scsi|virtio|sata|ide|efidisk|tpmstate)\d+", k) and "media=cdrom" not in str(v)
    }
    shared = {s["storage"] for s in pve.get(f"nodes/{node}/storage") or [] if int(s.get("shared") or 0) == 1}
    return bool(storages) and storages <= shared


def clone(pve: Pve, ctx: Context, rec: VMRecord, vmid: int, node: str) -> None:
    """A full clone of the pool's template as `vmid` on `node`, into the env's pool (the caller recorded
    `vmid` first). The description carries the tag set from the first moment (the tags come with the config)."""
    ids = pve_ids(ctx.infra)
    tnode, tvmid = ids.TemplateNode[rec.Pool], ids.TemplateVmid[rec.Pool]
    params: dict[str, Any] = {
        "newid": vmid,
        "name": rec.Name,
        "full": 1,
        "description": naming.description(ctx.tagger.tags("vm", rec.Name)),
    }
    if ids.Pool:
        params["pool"] = ids.Pool
    if node != tnode:
        params["target"] = node
    pve.run_task("POST", f"nodes/{tnode}/qemu/{tvmid}/clone", node=tnode, what=f"clone of {rec.Name}", **params)


def iso_volume(ctx: Context, vmid: int) -> str:
    return f"{iso_storage(ctx)}:iso/{naming.iso_name(vmid)}"


def iso_storage(ctx: Context) -> str:
    return pve_ids(ctx.infra).IsoStorage or DEFAULT_ISO_STORAGE


def seed_iso(ctx: Context, rec: VMRecord, vmid: int) -> bytes:
    """The VM's NoCloud ISO: its pool's user-data; instance-id = VMID + config hash (cloud-init runs again
    only for a new config, never on a reboot)."""
    instance_id = f"{vmid}-{template_hash(ctx.infra.LaunchTemplateID[rec.Pool])}"
    return nocloud_iso(pool_user_data(ctx, rec.Pool), meta_data(instance_id, rec.Name), DHCP_NETWORK_CONFIG)


def ensure_iso(pve: Pve, ctx: Context, rec: VMRecord, vmid: int, node: str, *, current: bool) -> str:
    """The VM's ISO on the file storage of its node, uploaded when missing or of another size; recorded
    (intent) before the upload so teardown deletes it either way. A VM of an older config keeps its ISO."""
    ids, storage = pve_ids(ctx.infra), iso_storage(ctx)
    volid = iso_volume(ctx, vmid)
    ids.Isos = {**ids.Isos, rec.Name: volid}
    ctx.save()
    listed = {c.get("volid"): c for c in pve.get(f"nodes/{node}/storage/{storage}/content", content="iso") or []}
    if volid in listed and not current:
        return volid
    if not current:  # an outdated VM's ISO is gone: PVE would not start it without one
        ctx.log(
            f"{rec.Name}: its NoCloud ISO is missing; uploading the current config's "
            "(cloud-init runs it at the next boot)"
        )
    data = seed_iso(ctx, rec, vmid)
    if volid in listed and int(listed[volid].get("size") or -1) == len(data):
        return volid
    if volid in listed:  # a partial upload, or another config's: replaced
        delete_iso(pve, node, volid)
    for attempt in (1, 2):
        pve.run_task(
            "POST",
            f"nodes/{node}/storage/{storage}/upload",
            node=node,
            what=f"upload of {volid}",
            content="iso",
            filename=NamedBytes(data, naming.iso_name(vmid)),
        )
        # A retried upload re-sends a consumed stream: what arrived is checked, not assumed.
        got = iso_size(pve, node, storage, volid)
        if got == len(data):
            break
        delete_iso(pve, node, volid)
        if attempt == 2:
            raise CloudError(f"upload of {volid}: {got} bytes arrived of {len(data)}", code="UploadIncomplete")
    ctx.log(f"{rec.Name}: NoCloud ISO {volid} uploaded ({len(data)} bytes)")
    return volid


def iso_size(pve: Pve, node: str, storage: str, volid: str) -> int | None:
    for c in pve.get(f"nodes/{node}/storage/{storage}/content", content="iso") or []:
        if c.get("volid") == volid:
            return int(c.get("size") or 0)
    return None


def delete_iso(pve: Pve, node: str, volid: str) -> bool:
    """The volid goes in the path as it is (`content/local:iso/<file>`), the way PVE's own clients send it."""
    storage = volid.split(":", 1)[0]
    return delete(
        lambda: pve.run_task(
            "DELETE", f"nodes/{node}/storage/{storage}/content/{volid}", node=node, what=f"delete {volid}"
        ),
        what=f"delete {volid}",
    )


def isos_listed(pve: Pve, volids: set[str]) -> list[str]:
    """Which of `volids` some node's copy of their storage still lists, sorted."""
    found: set[str] = set()
    for node in pve.nodes:
        for storage in sorted({v.split(":", 1)[0] for v in volids}):
            listed = {c.get("volid") for c in pve.get(f"nodes/{node}/storage/{storage}/content", content="iso") or []}
            found |= volids & listed
    return sorted(found)


def assert_isos_gone(pve: Pve, volids: set[str]) -> None:
    """Raise, naming them, if any of `volids` is still listed after its delete (answered as done, or taken
    as "already gone"): the caller's record of them must stay, so a later scan or re-run finds them."""
    left = isos_listed(pve, volids)
    if left:
        raise CloudError(
            f"{len(left)} NoCloud ISOs are still on the cluster after their delete: {', '.join(left)}; "
            "run it again (or delete them on the node's storage)",
            code="IsoNotDeleted",
        )


def delete_isos_named(pve: Pve, volids: set[str]) -> int:
    """The ISOs on every node's copy of their storage (a file storage is per node unless shared)."""
    removed = 0
    storages = {v.split(":", 1)[0] for v in volids}
    for node in pve.nodes:
        for storage in sorted(storages):
            listed = {c.get("volid") for c in pve.get(f"nodes/{node}/storage/{storage}/content", content="iso") or []}
            for volid in sorted(volids & listed):
                removed += delete_iso(pve, node, volid)
    return removed


def _props(value: str) -> dict[str, str]:
    out = {}
    for part in str(value).split(","):
        key, sep, val = part.partition("=")
        out[key] = val if sep else ""
    return out


def net0(current: str | None, bridge: str) -> str:
    """`virtio=<MAC>,bridge=<bridge>,firewall=1`, keeping the clone's MAC (PVE would make a new one)."""
    props = _props(current or "virtio")
    model = next((k for k in props if k in ("virtio", "e1000", "e1000e", "vmxnet3", "rtl8139")), "virtio")
    head = f"{model}={props[model]}" if props.get(model) else model
    return f"{head},bridge={bridge},firewall=1"


def desired_config(
    ctx: Context, rec: VMRecord, current: dict[str, Any], volid: str, *, latest: bool = True
) -> dict[str, str]:
    """What the VM's config must say. A VM of an older config version (`latest` False) keeps its shape:
    it is outdated, and `vmplane rotate` replaces it; only its tags, NIC and ISO are kept right."""
    shape = pool_shape(ctx, rec.Pool)
    tags = ctx.tagger.tags("vm", rec.Name)
    sized = {"cores": str(shape["cores"]), "memory": str(shape["memory"])} if latest else {}
    return {
        **sized,
        "tags": ";".join(naming.tag_tokens(tags)),
        "description": naming.description(tags),
        "net0": net0(current.get("net0"), str(ctx.infra.NetworkID)),
        CDROM: f"{volid},media=cdrom",
        "agent": "enabled=1",
    }


def _drive_props(value: str) -> dict[str, str]:
    """A property string compared as PVE stores it: `size=` is PVE's own, a bare `1` is `enabled=1`."""
    props = {k: v for k, v in _props(value).items() if k != "size"}
    return {"enabled": "1"} if props == {"1": ""} else props


def same(key: str, want: str, have: Any) -> bool:
    if have is None:
        return False
    if key in ("net0", CDROM, "agent"):
        return _drive_props(want) == _drive_props(str(have))
    if key == "tags":
        return tag_set({"tags": want}) == tag_set({"tags": have})
    return str(have).strip() == want.strip()


def configure(pve: Pve, ctx: Context, rec: VMRecord, vmid: int, node: str, volid: str, *, latest: bool = True) -> None:
    """Set what differs (a re-run sends nothing), grow the boot disk, turn the VM's firewall on."""
    path = f"nodes/{node}/qemu/{vmid}"
    current = pve.get(f"{path}/config")
    want = desired_config(ctx, rec, current, volid, latest=latest)
    changes: dict[str, Any] = {k: v for k, v in want.items() if not same(k, v, current.get(k))}
    if changes:
        pve.run_task("POST", f"{path}/config", node=node, what=f"config of {rec.Name}", **changes)
    if latest:
        grow_disk(pve, ctx, rec, path, node, current)
    firewall_on(pve, ctx, path)


def boot_disk(config: dict[str, Any]) -> str:
    order = str(config.get("boot", ""))
    if order.startswith("order="):
        for dev in order[len("order=") :].split(";"):
            if dev in config and "media=cdrom" not in str(config[dev]) and not dev.startswith("net"):
                return dev
    return "scsi0"


def disk_gb(value: str) -> float:
    found = _SIZE.search(value)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else 0.0


def grow_disk(pve: Pve, ctx: Context, rec: VMRecord, path: str, node: str, config: dict[str, Any]) -> None:
    """Only grows: a template disk larger than diskGb stays as it is (PVE cannot shrink a disk)."""
    want = pool_shape(ctx, rec.Pool)["diskGb"]
    disk = boot_disk(config)
    have = disk_gb(str(config.get(disk, "")))
    if have < want:
        pve.run_task("PUT", f"{path}/resize", node=node, what=f"resize of {rec.Name}", disk=disk, size=f"{want}G")
    elif have > want:
        ctx.log(f"{rec.Name}: {disk} is {have:g}G, more than diskGb {want}: kept (disks only grow)")


def firewall_on(pve: Pve, ctx: Context, path: str) -> None:
    """Inbound DROP except what the env's security group allows; DHCP allowed (the SDN's dnsmasq)."""
    options = pve.get(f"{path}/firewall/options") or {}
    if int(options.get("enable") or 0) != 1 or options.get("policy_in") != "DROP" or int(options.get("dhcp") or 0) != 1:
        pve.put(f"{path}/firewall/options", enable=1, policy_in="DROP", dhcp=1)
    group = ctx.infra.VMSecurityGroupID
    if not group:
        return
    rules = pve.get(f"{path}/firewall/rules") or []
    if not any(r.get("type") == "group" and r.get("action") == group for r in rules):
        pve.post(f"{path}/firewall/rules", type="group", action=group, enable=1, comment="vmplane")


def status(pve: Pve, node: str, vmid: str | int) -> str | None:
    """`running`, `stopped`, ... or None when the VM does not exist."""
    try:
        return str(pve.get(f"nodes/{node}/qemu/{vmid}/status/current").get("status"))
    except NotFoundError:
        return None


def wait_unlocked(pve: Pve, node: str, vmid: str | int, name: str) -> None:
    """A VM found under a task's lock (a clone a killed run started is still copying its disk) is waited
    for: its config cannot change until the lock goes."""

    def free() -> bool | None:
        try:
            current = pve.get(f"nodes/{node}/qemu/{vmid}/status/current") or {}
        except NotFoundError:
            return True  # gone meanwhile (the lock was a destroy's)
        return None if current.get("lock") else True

    poll(free, what=f"VM {name} ({vmid}) to be unlocked", timeout=TASK_TIMEOUT, first=0.1, cap=5)


def destroy(pve: Pve, node: str, vmid: str | int, name: str) -> bool:
    """Stopped (hard: it is being deleted), then destroyed with its disks and every reference (purge). A VM
    under a task's lock (a clone still copying) is waited for: PVE refuses to destroy it meanwhile."""
    path = f"nodes/{node}/qemu/{vmid}"
    try:
        current = pve.get(f"{path}/status/current") or {}
    except NotFoundError:
        return False
    if current.get("lock"):
        wait_unlocked(pve, node, vmid, name)
        try:
            current = pve.get(f"{path}/status/current") or {}
        except NotFoundError:
            return False  # a destroy a killed run started finished it
    if current.get("status") == "running":
        pve.run_task("POST", f"{path}/status/stop", node=node, what=f"stop of {name}")
    return delete(
        lambda: pve.run_task(
            "DELETE", path, node=node, what=f"destroy of {name}", purge=1, **{"destroy-unreferenced-disks": 1}
        ),
        what=f"destroy VM {vmid}",
    )
