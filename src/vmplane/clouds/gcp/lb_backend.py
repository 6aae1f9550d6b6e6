"""stepCreateTargetGroup on Google Cloud: the global backend service with one backend per pool.

An ASG pool's backend is its regional MIG's instance group, and the MIG heals on the LB's health
check (autohealing.py); a Fixed pool's VMs are put in one unmanaged instance group per zone, whose
membership is reconciled on every run (the step also runs after `vmplane scale`). Each group names
the serving port `http`, which the backend service sends to.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import autohealing, naming, operations
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.lb_refs import NAMED_PORT, ensure, lb_block, ref, tail
from vmplane.clouds.gcp.ownership import description, owned_by
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.envspec.models import AsgPool
from vmplane.state import VMState

BACKEND_TIMEOUT_SEC = 30


def ensure_backend(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    lb, infra, ids = lb_block(ctx), ctx.infra, gcp_ids(ctx.infra)
    if not ids.HealthCheck:
        raise InvalidRequestError("the health check must exist before the backend service")
    groups = [_mig_group(gcp, ctx, pool) for pool in sorted(_asg_pools(ctx)) if pool in infra.ScalingGroupID]
    for zone, vms in sorted(_fixed_vms_by_zone(ctx).items()):
        groups.append(_ensure_unmanaged_group(gcp, ctx, zone, vms))
    name = naming.backend_service(ctx.spec)
    ids.BackendService = name
    ctx.save()
    backends = [
        compute_v1.Backend(group=g, balancing_mode="UTILIZATION", capacity_scaler=1.0, max_utilization=0.8)
        for g in groups
    ]
    hc = ref(gcp, f"global/healthChecks/{ids.HealthCheck}")
    desired = compute_v1.BackendService(
        name=name,
        description=description(ctx.tagger, "backend-service"),
        load_balancing_scheme="EXTERNAL_MANAGED",
        protocol="HTTP",
        port_name=NAMED_PORT,
        health_checks=[hc],
        timeout_sec=BACKEND_TIMEOUT_SEC,
        backends=backends,
    )
    client = gcp.compute("BackendServices")

    def get() -> Any:
        return client.get(project=gcp.project, backend_service=name, timeout=CALL_TIMEOUT)

    def insert(request_id: str) -> Any:
        req = compute_v1.InsertBackendServiceRequest(
            project=gcp.project, backend_service_resource=desired, request_id=request_id
        )
        return client.insert_unary(request=req, timeout=CALL_TIMEOUT)

    found, created = ensure(gcp, ctx, "backendServices", name, get=get, insert=insert)
    if not created and _differs(found, groups, hc):
        # Pools changed (or the health check): the backends are patched in place, no downtime.
        # Google requires the current fingerprint (412 otherwise): read-modify-write, one retry on a race.
        def send(fingerprint: str, request_id: str) -> Any:
            patch = compute_v1.BackendService(
                backends=backends,
                health_checks=[hc],
                port_name=NAMED_PORT,
                timeout_sec=BACKEND_TIMEOUT_SEC,
                fingerprint=fingerprint,
            )
            req = compute_v1.PatchBackendServiceRequest(
                project=gcp.project, backend_service=name, backend_service_resource=patch, request_id=request_id
            )
            return client.patch_unary(request=req, timeout=CALL_TIMEOUT)

        operations.patch_current(gcp, "compute.backendServices.patch", get, send, what=f"update {name}")
    for pool in sorted(_asg_pools(ctx) & set(infra.ScalingGroupID)):
        autohealing.ensure(gcp, ctx, pool, hc)  # the MIG recreates a VM that fails this health check
    _drop_stale_groups(gcp, ctx, {tail(g) for g in groups})
    ctx.log(f"backend service {name}: {len(groups)} backends, HTTP to port {lb.target_port} (named port http)")


def _differs(found: Any, groups: list[str], hc: str) -> bool:
    current = sorted(tail(b.group) for b in found.backends)
    return (
        current != sorted(tail(g) for g in groups)
        or [tail(h) for h in found.health_checks] != [hc]
        or found.port_name != NAMED_PORT
        or found.timeout_sec != BACKEND_TIMEOUT_SEC
    )


def _asg_pools(ctx: Context) -> set[str]:
    return {n for n, p in ctx.spec.pools.items() if isinstance(p, AsgPool)}


def _fixed_vms_by_zone(ctx: Context) -> dict[str, list[str]]:
    """zone -> the Fixed-pool VMs (instance names) that should serve."""
    asg = _asg_pools(ctx)
    out: dict[str, list[str]] = defaultdict(list)
    for vm in ctx.infra.VMs:
        if vm.ID and vm.AZ and vm.Pool not in asg and vm.State not in (VMState.terminated, VMState.failed):
            out[vm.AZ].append(vm.ID)
    return {z: sorted(v) for z, v in out.items()}


def _mig_group(gcp: GcpClients, ctx: Context, pool: str) -> str:
    """The MIG's instance group (same name as the MIG), named port set so the backend can reach it."""
    from google.cloud import compute_v1

    mig = ctx.infra.ScalingGroupID[pool].rsplit("/", 1)[-1]
    client = gcp.compute("RegionInstanceGroups")
    group = gcp.call(
        "compute.regionInstanceGroups.get",
        lambda: client.get(project=gcp.project, region=gcp.region, instance_group=mig, timeout=CALL_TIMEOUT),
    )
    port = lb_block(ctx).target_port
    if [(p.name, p.port) for p in group.named_ports] != [(NAMED_PORT, port)]:
        body = compute_v1.RegionInstanceGroupsSetNamedPortsRequest(
            named_ports=[compute_v1.NamedPort(name=NAMED_PORT, port=port)], fingerprint=group.fingerprint
        )
        operations.run(
            gcp,
            "compute.regionInstanceGroups.setNamedPorts",
            lambda: client.set_named_ports_unary(
                project=gcp.project,
                region=gcp.region,
                instance_group=mig,
                region_instance_groups_set_named_ports_request_resource=body,
                timeout=CALL_TIMEOUT,
            ),
            what=f"named port on {mig}",
        )
    return ref(gcp, f"regions/{gcp.region}/instanceGroups/{mig}")


def _ensure_unmanaged_group(gcp: GcpClients, ctx: Context, zone: str, vms: list[str]) -> str:
    from google.cloud import compute_v1

    ids, name, port = gcp_ids(ctx.infra), naming.instance_group(ctx.spec, zone), lb_block(ctx).target_port
    ids.InstanceGroups = {**ids.InstanceGroups, zone: name}
    ctx.save()  # intent
    client = gcp.compute("InstanceGroups")

    def get() -> Any:
        return client.get(project=gcp.project, zone=zone, instance_group=name, timeout=CALL_TIMEOUT)

    def insert(request_id: str) -> Any:
        group = compute_v1.InstanceGroup(
            name=name,
            description=description(ctx.tagger, "instance-group"),
            named_ports=[compute_v1.NamedPort(name=NAMED_PORT, port=port)],
        )
        req = compute_v1.InsertInstanceGroupRequest(
            project=gcp.project, zone=zone, instance_group_resource=group, request_id=request_id
        )
        return client.insert_unary(request=req, timeout=CALL_TIMEOUT)

    group, _ = ensure(gcp, ctx, "instanceGroups", name, get=get, insert=insert)
    if [(p.name, p.port) for p in group.named_ports] != [(NAMED_PORT, port)]:
        body = compute_v1.InstanceGroupsSetNamedPortsRequest(
            named_ports=[compute_v1.NamedPort(name=NAMED_PORT, port=port)], fingerprint=group.fingerprint
        )
        _zonal(
            gcp,
            "setNamedPorts",
            name,
            lambda: client.set_named_ports_unary(
                project=gcp.project,
                zone=zone,
                instance_group=name,
                instance_groups_set_named_ports_request_resource=body,
                timeout=CALL_TIMEOUT,
            ),
        )
    want = {ref(gcp, f"zones/{zone}/instances/{vm}") for vm in vms}
    have = set(members(gcp, zone, name))
    if want - have:
        add_members(gcp, zone, name, sorted(want - have))
    if have - want:
        remove_members(gcp, zone, name, sorted(have - want))
    return ref(gcp, f"zones/{zone}/instanceGroups/{name}")


def _zonal(gcp: GcpClients, verb: str, name: str, call: Any) -> None:
    operations.run(gcp, f"compute.instanceGroups.{verb}", call, what=f"{verb} on {name}")


def members(gcp: GcpClients, zone: str, name: str) -> list[str]:
    """The group's instances, as `projects/...` references."""
    from google.cloud import compute_v1

    client = gcp.compute("InstanceGroups")
    body = compute_v1.InstanceGroupsListInstancesRequest(instance_state="ALL")
    found = gcp.call(
        "compute.instanceGroups.listInstances",
        lambda: list(
            client.list_instances(
                project=gcp.project,
                zone=zone,
                instance_group=name,
                instance_groups_list_instances_request_resource=body,
                timeout=CALL_TIMEOUT,
            )
        ),
    )
    return [tail(i.instance) for i in found]


def add_members(gcp: GcpClients, zone: str, name: str, instances: list[str]) -> None:
    """Add VMs (`projects/...` references) that are not members yet: Google refuses a second add."""
    from google.cloud import compute_v1

    client = gcp.compute("InstanceGroups")
    body = compute_v1.InstanceGroupsAddInstancesRequest(
        instances=[compute_v1.InstanceReference(instance=i) for i in instances]
    )
    _zonal(
        gcp,
        "addInstances",
        name,
        lambda: client.add_instances_unary(
            project=gcp.project,
            zone=zone,
            instance_group=name,
            instance_groups_add_instances_request_resource=body,
            timeout=CALL_TIMEOUT,
        ),
    )


def remove_members(gcp: GcpClients, zone: str, name: str, instances: list[str]) -> None:
    from google.cloud import compute_v1

    client = gcp.compute("InstanceGroups")
    body = compute_v1.InstanceGroupsRemoveInstancesRequest(
        instances=[compute_v1.InstanceReference(instance=i) for i in instances]
    )
    _zonal(
        gcp,
        "removeInstances",
        name,
        lambda: client.remove_instances_unary(
            project=gcp.project,
            zone=zone,
            instance_group=name,
            instance_groups_remove_instances_request_resource=body,
            timeout=CALL_TIMEOUT,
        ),
    )


def delete_group(gcp: GcpClients, ctx: Context, zone: str, name: str) -> None:
    """Delete one of the job's unmanaged groups (its VMs stay: deleting a group never deletes members);
    a group of that name that is not the job's is left alone."""
    client = gcp.compute("InstanceGroups")
    found = operations.find(
        gcp,
        "compute.instanceGroups.get",
        lambda: client.get(project=gcp.project, zone=zone, instance_group=name, timeout=CALL_TIMEOUT),
    )
    if found is not None and owned_by(found, ctx.tagger):
        operations.remove(
            gcp,
            "compute.instanceGroups.delete",
            lambda: client.delete_unary(project=gcp.project, zone=zone, instance_group=name, timeout=CALL_TIMEOUT),
            what=f"delete {name}",
        )
    ids = gcp_ids(ctx.infra)
    ids.InstanceGroups = {z: n for z, n in ids.InstanceGroups.items() if z != zone}
    ctx.save()


def _drop_stale_groups(gcp: GcpClients, ctx: Context, used: set[str]) -> None:
    """Unmanaged groups of zones that no longer hold a Fixed VM (after a scale down): out of the
    backend service by now, so deleted."""
    for zone, name in sorted(gcp_ids(ctx.infra).InstanceGroups.items()):
        if ref(gcp, f"zones/{zone}/instanceGroups/{name}") not in used:
            delete_group(gcp, ctx, zone, name)
