"""stepRepairDrift on Google Cloud: read the drift again and undo what only this step can; the provisioning
steps that follow reconcile the rest from the record and by name.

- extra (the job's id on it, or a firewall rule on the job's network, that the file does not ask for):
  deleted through the table's `delete` (gone already is done);
- a Fixed VM stopped outside `vmplane stop` and outside any schedule's stopped hours: started
  (`power.start_vm`: one already running is done); the VM step then waits for it and checks readiness;
- labels changed: the whole job re-labelled by the tag step's code (`retag`, idempotent);
- a Fixed VM missing: its record dropped, so the VM step makes it again under its slot's name;
- anything else missing or changed (a firewall rule, the router or its NAT, a template, a forwarding
  rule, the backend service's backends): the step that owns it finds it by its deterministic name and
  creates or patches it (firewall.ensure_firewall, network._ensure_router, templates.ensure_template,
  lb.ensure_listeners, lb_backend.ensure_backend), so nothing is done here.

Each action re-reads before it acts, so a repair killed anywhere and run again converges.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.drift import Drift, DriftChange
from vmplane.clouds.gcp import power, retag
from vmplane.clouds.gcp.drift import drift, fixed_vms, wanted_status
from vmplane.clouds.gcp.instances import instance_name
from vmplane.clouds.gcp.resources import TABLE
from vmplane.clouds.gcp.session import GcpClients


def repair_drift(gcp: GcpClients, ctx: Context) -> None:
    found = [d for d in drift(gcp, ctx) if d.repairable]
    for d in found:
        if d.change is DriftChange.extra:
            _delete_extra(gcp, ctx, d)
    relabel = False
    for d in found:
        if d.change is DriftChange.missing and d.kind == "instance":
            ctx.infra.VMs = [v for v in ctx.infra.VMs if not (v.Index >= 0 and instance_name(v) == d.id)]
            ctx.save()
            ctx.log(f"{d.resource} is gone: the VM step makes it again under its name")
        elif d.change is DriftChange.changed and d.kind == "instance":
            _start_if_wanted(gcp, ctx, d)
        relabel = relabel or any(f.field.startswith("tags.") for f in d.fields)
    if relabel:
        retag.retag(gcp, ctx)
    ctx.log(f"repair: {len(found)} drifted resource(s); the provisioning steps reconcile what is left")


def _delete_extra(gcp: GcpClients, ctx: Context, d: Drift) -> None:
    kind = TABLE.kind(d.kind)
    if kind.delete is None or d.id is None:
        ctx.log(f"{d.resource}: extra, and vmplane has no way to delete a {d.kind}: left alone")
        return
    kind.delete(gcp, ctx, d.id)
    ctx.log(f"{d.resource}: deleted (it is not in the file)")


def _start_if_wanted(gcp: GcpClients, ctx: Context, d: Drift) -> None:
    """Start a stopped Fixed VM when the file wants it running now (not a `vmplane stop`ped pool, not a
    schedule's stopped hours: `wanted_status` says RUNNING)."""
    if not any(f.field == "status" for f in d.fields):
        return
    rec = next((v for v in fixed_vms(ctx) if instance_name(v) == d.id), None)
    if rec is None or wanted_status(ctx, rec) != "RUNNING":
        return
    power.start_vm(gcp, ctx, rec)
    ctx.log(f"{d.resource}: started")
