"""Fixed pools: zonal instances, one per slot `<env>-<pool>-<i>` (the record's `Name`), spread round-robin
over the zones, made from the pool's current regional instance template; and waiting for instances to run.

A slot's instance is first named as the slot; a rotation replaces it with `<env>-<pool>-<i>-v<N>`
(naming.rotated), so the record's `ID` is the instance's name and `Name` only the slot's.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.operations import create, find, last_segment, remove
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.waits import poll
from vmplane.envspec.models import EnvSpec, FixedPool
from vmplane.state import InfraConfig, VMRecord, VMState

RUNNING_TIMEOUT = 600.0
GONE = ("STOPPING", "STOPPED", "TERMINATED", "SUSPENDED")


def instance_name(rec: VMRecord) -> str:
    """The instance a Fixed VM record stands for: its `ID` (a rotated slot's new name), else the slot's."""
    return rec.ID or rec.Name


def replacement_of(rec: VMRecord) -> str | None:
    """The replacement a rotation recorded for this slot before inserting it (None when none is in flight,
    or for a record an older vmplane wrote as `<name>@v<N>`, whose rotation re-used the name)."""
    wanted = rec.ReplacementID
    return wanted if wanted and naming.valid(wanted) and wanted != instance_name(rec) else None


def record_of(infra: InfraConfig, instance: str) -> VMRecord | None:
    """The record an instance belongs to: the slot's current VM, or the replacement a rotation is making."""
    return next((v for v in infra.VMs if instance in (instance_name(v), replacement_of(v))), None)


def template_url(gcp: GcpClients, name: str) -> str:
    return f"projects/{gcp.project}/regions/{gcp.region}/instanceTemplates/{name}"


def template_version(spec: EnvSpec, pool_name: str, template: str | None, current: int) -> int | None:
    """The version of a template reference (name or URL); names may be digest-shortened, so matched by
    making each candidate name rather than parsing."""
    if not template:
        return None
    name = last_segment(template)
    return next((v for v in range(1, current + 2) if naming.template(spec, pool_name, v) == name), None)


def region_zones(gcp: GcpClients) -> list[str]:
    """The zones of the client's region (regions.get)."""
    client = gcp.compute("Regions")
    region = gcp.call(
        "compute.regions.get", lambda: client.get(project=gcp.project, region=gcp.region, timeout=CALL_TIMEOUT)
    )
    return sorted(last_segment(z) for z in region.zones)


def list_instances(gcp: GcpClients, zones: list[str]) -> list[tuple[str, Any]]:
    """(zone, instance) over `zones`, one instances.list each (per zone rather than aggregatedList:
    vmplane's zones are known, and the sandbox does not emulate the aggregated call)."""
    client = gcp.compute("Instances")
    out: list[tuple[str, Any]] = []
    for zone in zones:
        listed = gcp.call(
            "compute.instances.list",
            lambda z=zone: list(client.list(project=gcp.project, zone=z, timeout=CALL_TIMEOUT)),  # type: ignore[misc]
        )
        out.extend((zone, inst) for inst in listed)
    return out


def get_instance(gcp: GcpClients, zone: str, name: str) -> Any | None:
    client = gcp.compute("Instances")
    return find(
        gcp,
        "compute.instances.get",
        lambda: client.get(project=gcp.project, zone=zone, instance=name, timeout=CALL_TIMEOUT),
    )


def insert_instance(gcp: GcpClients, ctx: Context, pool_name: str, name: str, zone: str) -> None:
    """One VM from the pool's current template. The template's properties are also sent inline (same
    values, so Google's merge changes nothing), which keeps the VM's shape independent of how an
    endpoint treats `sourceInstanceTemplate` (the sandbox ignores it)."""
    from google.cloud import compute_v1 as c

    from vmplane.clouds.gcp.templates import get_template

    client = gcp.compute("Instances")
    template_name = ctx.infra.LaunchTemplateID[pool_name]
    found = get_template(gcp, template_name)
    if found is None:
        raise InvalidRequestError(f"instance template {template_name} is gone: re-run the template step")
    p = found.properties
    disks = [c.AttachedDisk(d) for d in p.disks]
    for d in disks:  # an instance's disk names its type as a zonal path (a template's by name)
        if d.initialize_params.disk_type:
            d.initialize_params.disk_type = f"zones/{zone}/diskTypes/{last_segment(d.initialize_params.disk_type)}"
    resource = c.Instance(
        name=name,
        description=ownership.description(ctx.tagger, "vm"),
        labels=dict(p.labels),
        machine_type=f"zones/{zone}/machineTypes/{last_segment(p.machine_type)}",
        disks=disks,
        network_interfaces=list(p.network_interfaces),
        service_accounts=list(p.service_accounts),
        tags=p.tags,
        metadata=p.metadata,
        shielded_instance_config=p.shielded_instance_config,
    )
    template = template_url(gcp, template_name)
    create(
        gcp,
        "compute.instances.insert",
        lambda rid: client.insert_unary(
            request=c.InsertInstanceRequest(
                project=gcp.project,
                zone=zone,
                instance_resource=resource,
                source_instance_template=template,
                request_id=rid,
            ),
            timeout=CALL_TIMEOUT,
        ),
        what=f"instance {name}",
    )


def record_instance(ctx: Context, rec: VMRecord, inst: Any) -> None:
    rec.ID = inst.name
    rec.AZ = last_segment(inst.zone) if inst.zone else rec.AZ
    if inst.network_interfaces:
        rec.PrivateIP = inst.network_interfaces[0].network_i_p or rec.PrivateIP
        rec.SubnetID = last_segment(inst.network_interfaces[0].subnetwork or "") or rec.SubnetID
    current = ctx.infra.LaunchTemplateVersion.get(rec.Pool, 1)
    version = template_version(ctx.spec, rec.Pool, source_template(inst), current)
    rec.LaunchTemplateVersion = version if version is not None else rec.LaunchTemplateVersion


def source_template(inst: Any) -> str | None:
    """The template an instance was made from: Google's `instance-template` metadata key, set on an
    instance created from one (None where an endpoint does not set it: the record then keeps the
    version vmplane inserted it with)."""
    for item in inst.metadata.items if inst.metadata else []:
        if item.key == "instance-template":
            return str(item.value)
    return None


def ensure_fixed_pool(gcp: GcpClients, ctx: Context, pool_name: str, pool: FixedPool) -> None:
    infra = ctx.infra
    zones = infra.Zones
    for index in range(pool.size):
        name = naming.instance(ctx.spec, pool_name, index)
        rec = infra.vm(name)
        if rec is None:
            zone = zones[index % len(zones)]
            rec = VMRecord(Name=name, Pool=pool_name, Index=index, ID=name, AZ=zone)
            infra.VMs = [*infra.VMs, rec]
            ctx.save()  # intent first: a crash from here on leaves a record to reconcile
        zone = rec.AZ or zones[index % len(zones)]
        live = get_instance(gcp, zone, instance_name(rec))
        if live is None and (new := replacement_of(rec)) is not None:
            # A rotation stopped after deleting the old VM (it goes only once its replacement is ready):
            # the replacement is the slot's VM now, checked for readiness again below.
            rec.ID, rec.ReplacementID, rec.State = new, None, VMState.pending
            ctx.save()
            live = get_instance(gcp, zone, new)
        if live is None:
            insert_instance(gcp, ctx, pool_name, instance_name(rec), zone)
            rec.State, rec.LaunchTemplateVersion = VMState.pending, infra.LaunchTemplateVersion[pool_name]
            live = get_instance(gcp, zone, instance_name(rec))
        elif not ownership.owned_by(live, ctx.tagger):
            owner = ownership.owner_of(live, ctx.tagger)
            raise ConflictError(f"instance {instance_name(rec)} exists and belongs to {owner}")
        if live is not None:
            record_instance(ctx, rec, live)
            note_power_state(rec, live)
        ctx.save()
    _shrink(gcp, ctx, pool_name, pool.size)
    ctx.log(f"pool {pool_name}: {pool.size} VMs over {', '.join(zones[: pool.size])}")


def note_power_state(rec: VMRecord, inst: Any) -> None:
    """A VM found stopped (TERMINATED is GCP's stopped state: by `vmplane stop`, the pool's schedule or by
    hand) is recorded `stopped`: not recreated, not waited for. One found running again after being
    recorded stopped goes back through the readiness check."""
    if inst.status in GONE:
        rec.State = VMState.stopped
    elif rec.State is VMState.stopped:
        rec.State = VMState.bootstrap if inst.status == "RUNNING" else VMState.pending


def owned_instances(gcp: GcpClients, ctx: Context, zones: list[str]) -> list[tuple[str, Any]]:
    """(zone, instance) of every instance in `zones` named with the env's prefix and carrying this job's id."""
    prefix = naming.prefix(ctx.spec)
    return [
        (zone, inst)
        for zone, inst in list_instances(gcp, zones)
        if inst.name.startswith(prefix) and ownership.owned_by(inst, ctx.tagger)
    ]


def _shrink(gcp: GcpClients, ctx: Context, pool_name: str, size: int) -> None:
    """A smaller `size` removes the highest-numbered VMs. (Fixed pools behind a load balancer sit in
    unmanaged instance groups; a VM being deleted leaves its group with it.)"""
    for vm in [v for v in ctx.infra.VMs if v.Pool == pool_name and v.Index >= size]:
        if vm.AZ:
            for name in [n for n in (replacement_of(vm), instance_name(vm)) if n]:
                delete_instance(gcp, vm.AZ, name)
        ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != vm.Name]
        ctx.save()
        ctx.log(f"pool {pool_name}: removed {vm.Name} (size is {size})")


def delete_instance(gcp: GcpClients, zone: str, name: str) -> bool:
    client = gcp.compute("Instances")
    return remove(
        gcp,
        "compute.instances.delete",
        lambda: client.delete_unary(project=gcp.project, zone=zone, instance=name, timeout=CALL_TIMEOUT),
        what=f"delete instance {name}",
    )


def wait_running(gcp: GcpClients, ctx: Context, recs: list[VMRecord] | None = None) -> None:
    """Every pending VM RUNNING (then `bootstrap`), or fail at the deadline; an instance that stops or
    is deleted while launching fails at once."""
    pending = [v for v in (ctx.infra.VMs if recs is None else recs) if v.ID and v.AZ and v.State is VMState.pending]
    if not pending:
        return

    def all_running() -> bool | None:
        for rec in list(pending):
            inst = get_instance(gcp, str(rec.AZ), str(rec.ID))
            if inst is None:
                continue  # a MIG's instance may not be visible yet
            if inst.status in GONE:
                raise InvalidRequestError(f"instance {rec.ID} went {inst.status} during launch")
            if inst.status == "RUNNING":
                record_instance(ctx, rec, inst)
                rec.State = VMState.bootstrap
                pending.remove(rec)
        return True if not pending else None

    try:
        poll(all_running, what="instances to be RUNNING", timeout=RUNNING_TIMEOUT, first=0.1, cap=10)
    finally:
        ctx.save()
