"""stepRepairDrift on Proxmox VE: the drift read again (`drift.drift`), then each repairable difference
fixed, each fix idempotent, so a repair killed anywhere and run again ends where a clean one does:

- extra: a VM carrying the job's token that the record does not hold is stopped and destroyed with
  purge (with the ISO named for its VMID); an extra ISO deleted. Gone is done.
- changed: a stopped VM started (its pool is not stopped: Proxmox runs no schedules), its job tag tokens
  put back (tokens someone added are kept), its firewall on with inbound DROP and only the group rule;
  the group's rules reconciled with the file and its comment set back; the pool's comment set back;
  the subnet's SNAT and gateway set back, then the SDN config applied (intent: `SdnPending` first).
- missing: dropped from the record (the `*Created` flags, the ISO's entry, the VM's state) so the
  provisioning steps that follow create it again under its name. A deleted VM keeps its name *and its
  VMID*: the VMID is the record's intent (`clone_new` re-uses a recorded VMID that is still free), its
  ISO's name and the `/vms/<vmid>` permission paths derive from it, so nothing else changes; a VMID
  someone else took meanwhile gets a new one (compute.ensure_vm).
The template VMs are the user's: a missing one is reported (stepValidate then refuses the pool).
"""

from __future__ import annotations

from functools import partial

from vmplane.clouds import deletes
from vmplane.clouds.base import Context
from vmplane.clouds.drift import Drift, DriftChange
from vmplane.clouds.proxmox import firewall, naming, network, ownership, vms
from vmplane.clouds.proxmox.drift import drift
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.inventory import split_tags
from vmplane.clouds.proxmox.resources import TABLE, Reads, rule_text
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMRecord, VMState


def repair_drift(pve: Pve, ctx: Context) -> None:
    everything = drift(pve, ctx)
    found = [d for d in everything if d.repairable]
    reported = len(everything) - len(found)
    reads = Reads(pve)
    order = {DriftChange.extra: 0, DriftChange.changed: 1, DriftChange.missing: 2}
    # PVE refuses to start a VM whose CD-ROM volume is gone: such a VM is started by stepCreateVMs once its
    # ISO is uploaded again (missing now, or dropped from the record by a repair killed before it).
    no_iso = {d.id for d in found if d.kind == "iso" and d.change is DriftChange.missing} | {None}
    for d in sorted(found, key=lambda d: order[d.change]):
        if d.change is DriftChange.extra:
            delete = TABLE.kind(d.kind).delete
            if delete is not None and d.id is not None:
                delete(reads, ctx, d.id)
        elif d.change is DriftChange.changed:
            set_back(pve, ctx, d, no_iso)
        else:
            forget(ctx, d)
        ctx.log(f"repaired {d.resource} ({d.change.value}): {d.repair}")
    if pve_ids(ctx.infra).SdnPending:
        network.apply_sdn(pve, ctx)
    ctx.log(f"drift repaired: {len(found)} resource(s)" + (f"; {reported} reported only" if reported else ""))


def _record(ctx: Context, vmid: str | None) -> VMRecord | None:
    return next((v for v in ctx.infra.VMs if vmid is not None and vmid == v.ID), None)


def set_back(pve: Pve, ctx: Context, d: Drift, no_iso: set[str | None]) -> None:
    fields = {f.field for f in d.fields}
    if d.kind == "vm":
        rec = _record(ctx, d.id)
        if rec is not None and rec.AZ:
            if pve_ids(ctx.infra).Isos.get(rec.Name) in no_iso:
                fields.discard("status")  # stepCreateVMs starts it after the upload (compute.power_state)
            set_vm_back(pve, ctx, rec, fields)
    elif d.kind == "security-group" and d.id:
        if "rules" in fields:
            firewall.reconcile_rules(pve, d.id, firewall.desired_rules(ctx))
        if any(f.startswith("tags.") for f in fields):
            wanted = ownership.comment(ctx.tagger.tags("firewall", d.id))
            pve.post("cluster/firewall/groups", group=d.id, rename=d.id, comment=wanted)
    elif d.kind == "pool" and d.id:
        pve.put(f"pools/{d.id}", comment=ownership.comment(ctx.tagger.tags("pool", d.id)))
    elif d.kind == "sdn-subnet":
        ids = pve_ids(ctx.infra)
        ids.SdnPending = True
        ctx.save()  # intent: a kill before the apply applies on the re-run
        path = f"cluster/sdn/vnets/{ids.VNet}/subnets/{ids.Subnet}"
        pve.put(path, snat=1, gateway=ids.Gateway)
    elif d.kind == "sdn-vnet":
        ids = pve_ids(ctx.infra)
        ids.SdnPending = True
        ctx.save()
        pve.put(f"cluster/sdn/vnets/{ids.VNet}", zone=ids.Zone)


def set_vm_back(pve: Pve, ctx: Context, rec: VMRecord, fields: set[str]) -> None:
    node, vmid = str(rec.AZ), str(rec.ID)
    path = f"nodes/{node}/qemu/{vmid}"
    if "status" in fields:
        now = vms.status(pve, node, vmid)
        if rec.Pool in ctx.infra.StoppedPools:
            if now == "running":
                pve.run_task("POST", f"{path}/status/stop", node=node, what=f"stop of {rec.Name}")
        elif now != "running":
            rec.State = VMState.pending  # the VM steps wait for it to run and read its sentinel again
            ctx.save()
            pve.run_task("POST", f"{path}/status/start", node=node, what=f"start of {rec.Name}")
    if any(f.startswith("tags.") for f in fields):
        config = pve.get(f"{path}/config") or {}
        have = split_tags(config.get("tags"))
        job = naming.tag_tokens(ctx.tagger.tags("vm", rec.Name))
        if not set(job) <= set(have):  # the job's in configure's order, then the ones someone added
            pve.put(f"{path}/config", tags=";".join([*job, *sorted(set(have) - set(job))]))
    if "firewall.enable" in fields or "firewall.policy_in" in fields:
        pve.put(f"{path}/firewall/options", enable=1, policy_in="DROP", dhcp=1)
    if "firewall.rules" in fields:
        vm_rules_back(pve, ctx, path)


def vm_rules_back(pve: Pve, ctx: Context, path: str) -> None:
    """Only the group rule on the VM's own firewall: any other rule deleted (highest position first, a
    delete shifts those after it), the group rule added when missing (compute.firewall_on)."""
    group = ctx.infra.VMSecurityGroupID
    keep = rule_text({"type": "group", "action": group, "enable": 1}) if group else None
    kept = False
    extra = []
    for rule in pve.get(f"{path}/firewall/rules") or []:
        if not kept and rule_text(rule) == keep:
            kept = True
        else:
            extra.append(int(rule["pos"]))
    for pos in sorted(extra, reverse=True):
        deletes.delete(partial(pve.delete, f"{path}/firewall/rules/{pos}"), what=f"delete {path} rule {pos}")
    vms.firewall_on(pve, ctx, path)


def forget(ctx: Context, d: Drift) -> None:
    """What is missing leaves the record, so the step that makes it finds nothing and creates it again."""
    ids = pve_ids(ctx.infra)
    if d.kind == "vm":
        rec = _record(ctx, d.id)
        if rec is not None:
            rec.State, rec.PrivateIP = VMState.pending, None  # the VMID stays: the clone re-uses it
    elif d.kind == "iso":
        ids.Isos = {k: v for k, v in ids.Isos.items() if v != d.id}
    elif d.kind == "security-group":
        ids.SecurityGroupCreated = False
    elif d.kind == "pool":
        ids.PoolCreated = False
    elif d.kind == "sdn-subnet":
        ids.SubnetCreated = False
    elif d.kind == "sdn-vnet":
        ids.VNetCreated = ids.SubnetCreated = False
    elif d.kind == "sdn-zone":
        ids.ZoneCreated = ids.VNetCreated = ids.SubnetCreated = False
    ctx.save()
