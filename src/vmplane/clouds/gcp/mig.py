"""ASG pools: a regional managed instance group (MIG) over the environment's zones, its regional
autoscaler (CPU target), the pool's VM records following the group, and the MIG's native rolling update
that `vmplane rotate` starts.

The MIG stays on the template it was created (or last rotated) with: a new template version reaches it
only through `rotate`, so an apply never replaces a running VM (AWS's pinned behaviour; a MIG has no
`$Latest`).
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, NotFoundError
from vmplane.clouds.gcp import naming, ownership, schedule_policy
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.instances import RUNNING_TIMEOUT, template_url, template_version
from vmplane.clouds.gcp.operations import create, find, last_segment, patch_current, remove, run
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.waits import poll
from vmplane.envspec.models import AsgPool
from vmplane.state import VMRecord, VMState

COOL_DOWN_SECONDS = 60
ROLL_TIMEOUT = 1800.0


def update_policy(zones: int) -> Any:
    """PROACTIVE replace, never below full capacity. A regional MIG needs maxSurge 0 or at least its
    number of zones (Google spreads the surge over every zone), so surge is one VM per zone, and
    maxUnavailable 0 keeps every serving VM until its replacement runs."""
    from google.cloud import compute_v1 as c

    return c.InstanceGroupManagerUpdatePolicy(
        type_="PROACTIVE",
        minimal_action="REPLACE",
        max_surge=c.FixedOrPercent(fixed=max(1, zones)),
        max_unavailable=c.FixedOrPercent(fixed=0),
    )


def get_mig(gcp: GcpClients, name: str) -> Any | None:
    client = gcp.compute("RegionInstanceGroupManagers")
    return find(
        gcp,
        "compute.regionInstanceGroupManagers.get",
        lambda: client.get(project=gcp.project, region=gcp.region, instance_group_manager=name, timeout=CALL_TIMEOUT),
    )


def get_autoscaler(gcp: GcpClients, name: str) -> Any | None:
    client = gcp.compute("RegionAutoscalers")
    return find(
        gcp,
        "compute.regionAutoscalers.get",
        lambda: client.get(project=gcp.project, region=gcp.region, autoscaler=name, timeout=CALL_TIMEOUT),
    )


def ensure_mig_pool(gcp: GcpClients, ctx: Context, pool_name: str, pool: AsgPool) -> None:
    from google.cloud import compute_v1 as c

    spec, infra = ctx.spec, ctx.infra
    name = naming.mig(spec, pool_name)
    infra.ScalingGroupID = {**infra.ScalingGroupID, pool_name: name}
    ctx.save()  # intent: teardown finds the group by this name even if the insert's answer is lost
    client = gcp.compute("RegionInstanceGroupManagers")
    group = get_mig(gcp, name)
    if group is None:
        template = template_url(gcp, infra.LaunchTemplateID[pool_name])
        resource = c.InstanceGroupManager(
            name=name,
            description=ownership.description(ctx.tagger, "mig"),
            base_instance_name=naming.mig_base_instance_name(spec, pool_name),
            instance_template=template,
            versions=[c.InstanceGroupManagerVersion(instance_template=template)],
            target_size=target_size(ctx, pool_name, pool),
            distribution_policy=c.DistributionPolicy(
                zones=[
                    c.DistributionPolicyZoneConfiguration(zone=f"projects/{gcp.project}/zones/{z}") for z in infra.Zones
                ]
            ),
            named_ports=[c.NamedPort(name="http", port=80)],
            update_policy=update_policy(len(infra.Zones)),
        )
        create(
            gcp,
            "compute.regionInstanceGroupManagers.insert",
            lambda rid: client.insert_unary(
                request=c.InsertRegionInstanceGroupManagerRequest(
                    project=gcp.project, region=gcp.region, instance_group_manager_resource=resource, request_id=rid
                ),
                timeout=CALL_TIMEOUT,
            ),
            what=f"managed instance group {name}",
        )
        group = get_mig(gcp, name)
    elif not ownership.owned_by(group, ctx.tagger):
        raise ConflictError(
            f"instance group manager {name} exists and belongs to {ownership.owner_of(group, ctx.tagger)}"
        )
    elif int(group.target_size) != target_size(ctx, pool_name, pool):
        resize(gcp, name, target_size(ctx, pool_name, pool))
        ctx.log(f"pool {pool_name}: {name} resized to {target_size(ctx, pool_name, pool)}")
    if group is None:
        raise NotFoundError(f"managed instance group {name} not found after its insert", operation="get")
    _ensure_autoscaler(gcp, ctx, pool_name, pool, str(group.self_link))
    if gcp.target.sandbox:
        ctx.log("sandbox: the autoscaler is stored with its policy, but the sandbox never scales a group")
    managed = wait_stable(gcp, name, timeout=RUNNING_TIMEOUT)
    sync_records(ctx, pool_name, managed)
    ctx.log(f"pool {pool_name}: managed instance group {name} with {len(managed)} VMs")


def target_size(ctx: Context, pool_name: str, pool: AsgPool) -> int:
    """`desired`, or 0 for a pool `vmplane stop` stopped (an apply keeps it stopped)."""
    return 0 if pool_name in ctx.infra.StoppedPools else pool.desired


def resize(gcp: GcpClients, name: str, size: int) -> None:
    client = gcp.compute("RegionInstanceGroupManagers")
    run(
        gcp,
        "compute.regionInstanceGroupManagers.resize",
        lambda: client.resize_unary(
            project=gcp.project, region=gcp.region, instance_group_manager=name, size=size, timeout=CALL_TIMEOUT
        ),
        what=f"resize {name} to {size}",
    )


def autoscaler_resource(ctx: Context, pool_name: str, pool: AsgPool, target: str) -> Any:
    """The autoscaler the pool needs: min/max and the CPU target; with a schedule, min 0 and the scaling
    schedule that holds the pool's min during its hours (schedule_policy.py); mode OFF while the pool is
    stopped, so neither CPU nor the schedule scales it out until `vmplane start`."""
    from google.cloud import compute_v1 as c

    cpu = (pool.target_cpu_percent or 0) / 100
    schedules = {}
    if pool.schedule is not None:
        schedules[schedule_policy.SCALING_SCHEDULE] = schedule_policy.scaling_schedule(pool, pool.schedule)
    return c.Autoscaler(
        name=naming.autoscaler(ctx.spec, pool_name),
        description=ownership.description(ctx.tagger, "autoscaler"),
        target=target,
        autoscaling_policy=c.AutoscalingPolicy(
            min_num_replicas=0 if pool.schedule is not None else pool.min,
            max_num_replicas=pool.max,
            cpu_utilization=c.AutoscalingPolicyCpuUtilization(utilization_target=cpu),
            mode="OFF" if pool_name in ctx.infra.StoppedPools else "ON",
            cool_down_period_sec=COOL_DOWN_SECONDS,
            scaling_schedules=schedules,
        ),
    )


def policy_shape(policy: Any) -> tuple[Any, ...]:
    """What vmplane sets on an autoscaling policy, comparable between the cloud's copy and the wanted one."""
    schedules = {
        key: (s.schedule, s.duration_sec, s.min_required_replicas, s.time_zone or "UTC", bool(s.disabled))
        for key, s in dict(policy.scaling_schedules).items()
    }
    mode = str(getattr(policy.mode, "name", policy.mode) or "ON")
    return (
        policy.min_num_replicas,
        policy.max_num_replicas,
        round(policy.cpu_utilization.utilization_target, 4),
        mode,
        sorted(schedules.items()),
    )


def _ensure_autoscaler(gcp: GcpClients, ctx: Context, pool_name: str, pool: AsgPool, target: str) -> None:
    """With a CPU target: an autoscaler with min/max and the target (patched when they differ). Without
    one the group keeps `desired` VMs and an autoscaler vmplane made earlier goes (AWS drops its policy)."""
    from google.cloud import compute_v1 as c

    ids = gcp_ids(ctx.infra)
    name = naming.autoscaler(ctx.spec, pool_name)
    client = gcp.compute("RegionAutoscalers")
    found = get_autoscaler(gcp, name)
    if pool.target_cpu_percent is None:
        if found is not None and ownership.owned_by(found, ctx.tagger):
            delete_autoscaler(gcp, name)
        ids.Autoscalers = {k: v for k, v in ids.Autoscalers.items() if k != pool_name}
        ctx.save()
        return
    ids.Autoscalers = {**ids.Autoscalers, pool_name: name}
    ctx.save()
    want = autoscaler_resource(ctx, pool_name, pool, target)
    if found is None:
        create(
            gcp,
            "compute.regionAutoscalers.insert",
            lambda rid: client.insert_unary(
                request=c.InsertRegionAutoscalerRequest(
                    project=gcp.project, region=gcp.region, autoscaler_resource=want, request_id=rid
                ),
                timeout=CALL_TIMEOUT,
            ),
            what=f"autoscaler {name}",
        )
        return
    if not ownership.owned_by(found, ctx.tagger):
        raise ConflictError(f"autoscaler {name} exists and belongs to {ownership.owner_of(found, ctx.tagger)}")
    have = found.autoscaling_policy
    if policy_shape(have) == policy_shape(want.autoscaling_policy):
        return
    # PATCH is a JSON merge patch, so a schedule left out of it stays: dropping one takes PUT (update).
    dropped = set(dict(have.scaling_schedules)) - set(dict(want.autoscaling_policy.scaling_schedules))
    verb, send, request = (
        ("update", client.update_unary, c.UpdateRegionAutoscalerRequest)
        if dropped
        else ("patch", client.patch_unary, c.PatchRegionAutoscalerRequest)
    )
    create(
        gcp,
        f"compute.regionAutoscalers.{verb}",
        lambda rid: send(
            request=request(
                project=gcp.project, region=gcp.region, autoscaler=name, autoscaler_resource=want, request_id=rid
            ),
            timeout=CALL_TIMEOUT,
        ),
        what=f"autoscaler {name} {verb}",
    )
    policy = want.autoscaling_policy
    ctx.log(
        f"pool {pool_name}: autoscaler now min {policy.min_num_replicas} / max {policy.max_num_replicas}, "
        f"mode {policy.mode}, {len(policy.scaling_schedules)} scaling schedules"
    )


def sync_autoscaler(gcp: GcpClients, ctx: Context, pool_name: str, pool: AsgPool) -> None:
    """The pool's autoscaler brought to what the spec and StoppedPools ask (schedules, stop/start)."""
    group = get_mig(gcp, naming.mig(ctx.spec, pool_name))
    if group is None:
        raise NotFoundError(f"managed instance group of pool {pool_name} not found: run the VM step", operation="get")
    _ensure_autoscaler(gcp, ctx, pool_name, pool, str(group.self_link))


def managed_instances(gcp: GcpClients, name: str) -> list[Any]:
    client = gcp.compute("RegionInstanceGroupManagers")
    return gcp.call(
        "compute.regionInstanceGroupManagers.listManagedInstances",
        lambda: list(
            client.list_managed_instances(
                project=gcp.project, region=gcp.region, instance_group_manager=name, timeout=CALL_TIMEOUT
            )
        ),
    )


def wait_stable(gcp: GcpClients, name: str, *, timeout: float) -> list[Any]:
    """The group's instances once it has its target size and no instance has an action in flight."""

    def settled() -> list[Any] | None:
        group = get_mig(gcp, name)
        if group is None:
            return None
        managed = managed_instances(gcp, name)
        busy = [m for m in managed if m.current_action not in ("NONE", "")]
        return managed if len(managed) == int(group.target_size) and not busy else None

    return poll(settled, what=f"managed instance group {name} to settle", timeout=timeout, first=0.1, cap=10)


def sync_records(ctx: Context, pool_name: str, managed: list[Any]) -> None:
    """The pool's VM records follow the group: new instances added (pending until RUNNING is seen),
    gone ones dropped, each one's template version from the group's own answer."""
    infra = ctx.infra
    current = infra.LaunchTemplateVersion.get(pool_name, 1)
    by_name = {last_segment(m.instance): m for m in managed if m.instance}
    kept = [v for v in infra.VMs if v.Pool != pool_name or v.Name in by_name]
    known = {v.Name: v for v in kept}
    for vm_name, m in sorted(by_name.items()):
        rec = known.get(vm_name)
        if rec is None:
            zone = m.instance.split("/zones/", 1)[1].split("/", 1)[0] if "/zones/" in m.instance else None
            rec = VMRecord(Name=vm_name, Pool=pool_name, Index=-1, ID=vm_name, AZ=zone, State=VMState.pending)
            kept.append(rec)
        template = m.version.instance_template if m.version else None
        version = template_version(ctx.spec, pool_name, template, current)
        rec.LaunchTemplateVersion = version if version is not None else rec.LaunchTemplateVersion
    infra.VMs = kept
    ctx.save()


def patch(gcp: GcpClients, name: str, changes: Any, *, what: str) -> None:
    """regionInstanceGroupManagers.patch (a JSON merge patch: fields left out stay as they are)."""
    from google.cloud import compute_v1 as c

    client = gcp.compute("RegionInstanceGroupManagers")

    def get() -> Any:
        return client.get(project=gcp.project, region=gcp.region, instance_group_manager=name, timeout=CALL_TIMEOUT)

    def send(fingerprint: str, request_id: str) -> Any:
        """The changes with the group's current fingerprint: Google refuses an update without it (412)."""
        body = c.InstanceGroupManager(changes)
        body.fingerprint = fingerprint
        req = c.PatchRegionInstanceGroupManagerRequest(
            project=gcp.project,
            region=gcp.region,
            instance_group_manager=name,
            instance_group_manager_resource=body,
            request_id=request_id,
        )
        return client.patch_unary(request=req, timeout=CALL_TIMEOUT)

    patch_current(gcp, "compute.regionInstanceGroupManagers.patch", get, send, what=what)


def roll(gcp: GcpClients, ctx: Context, pool_name: str) -> list[Any]:
    """Point the group at the pool's current template with the PROACTIVE policy (the MIG's own rolling
    update) and wait until every instance runs it and the group is stable. Patching again after a
    crash is harmless: the same template is the same target."""
    from google.cloud import compute_v1 as c

    name = ctx.infra.ScalingGroupID[pool_name]
    template = template_url(gcp, ctx.infra.LaunchTemplateID[pool_name])
    changes = c.InstanceGroupManager(
        instance_template=template,
        versions=[c.InstanceGroupManagerVersion(instance_template=template)],
        update_policy=update_policy(len(ctx.infra.Zones)),
    )
    patch(gcp, name, changes, what=f"rolling update of {name}")

    def reached() -> bool | None:
        group = get_mig(gcp, name)
        status = group.status if group is not None else None
        return True if status is not None and status.version_target.is_reached and status.is_stable else None

    poll(reached, what=f"{name} to reach its new template", timeout=ROLL_TIMEOUT, first=0.2, cap=15)
    managed = wait_stable(gcp, name, timeout=RUNNING_TIMEOUT)
    sync_records(ctx, pool_name, managed)
    return managed


# ---- teardown -------------------------------------------------------------------------------------


def delete_autoscaler(gcp: GcpClients, name: str) -> bool:
    client = gcp.compute("RegionAutoscalers")
    return remove(
        gcp,
        "compute.regionAutoscalers.delete",
        lambda: client.delete_unary(project=gcp.project, region=gcp.region, autoscaler=name, timeout=CALL_TIMEOUT),
        what=f"delete autoscaler {name}",
    )


def delete_mig(gcp: GcpClients, name: str) -> None:
    """Resize to 0 first (no new instances while the group goes), then delete it with its VMs."""
    client = gcp.compute("RegionInstanceGroupManagers")
    if get_mig(gcp, name) is None:
        return
    remove(
        gcp,
        "compute.regionInstanceGroupManagers.resize",
        lambda: client.resize_unary(
            project=gcp.project, region=gcp.region, instance_group_manager=name, size=0, timeout=CALL_TIMEOUT
        ),
        what=f"resize {name} to 0",
    )
    remove(
        gcp,
        "compute.regionInstanceGroupManagers.delete",
        lambda: client.delete_unary(
            project=gcp.project, region=gcp.region, instance_group_manager=name, timeout=CALL_TIMEOUT
        ),
        what=f"delete managed instance group {name}",
    )


def job_migs(gcp: GcpClients, ctx: Context) -> tuple[list[str], list[str]]:
    """(MIG names, autoscaler names) in the region named with the env's prefix and carrying this job's id."""
    prefix = naming.prefix(ctx.spec)
    migs = gcp.compute("RegionInstanceGroupManagers")
    scalers = gcp.compute("RegionAutoscalers")
    groups = gcp.call(
        "compute.regionInstanceGroupManagers.list",
        lambda: list(migs.list(project=gcp.project, region=gcp.region, timeout=CALL_TIMEOUT)),
    )
    autoscalers = gcp.call(
        "compute.regionAutoscalers.list",
        lambda: list(scalers.list(project=gcp.project, region=gcp.region, timeout=CALL_TIMEOUT)),
    )

    def ours(items: list[Any]) -> list[str]:
        return [i.name for i in items if i.name.startswith(prefix) and ownership.owned_by(i, ctx.tagger)]

    return ours(groups), ours(autoscalers)
