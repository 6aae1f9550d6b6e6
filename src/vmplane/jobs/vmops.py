"""Operations on a provisioned environment (vmOp): attach/detach the load balancer, scale, rotate.

Each planner checks the request against the job and the driver's capabilities, and returns the steps
and the plan to show; `begin_operation` records it, and the workflow starts after commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vmplane.clouds.registry import driver_for
from vmplane.cost.delta import plan_cost
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool, LoadBalancer
from vmplane.errors import UsageError
from vmplane.jobs import service as jobs
from vmplane.jobs.poolsizes import drift, drift_warning, file_sizes, size_fields, size_resources
from vmplane.jobs.poolstate import stopped_reason
from vmplane.jobs.service import JobConflictError, JobView, OperationRecord
from vmplane.pipeline.plan import LB_STEPS, Action, Plan, PlanKind
from vmplane.settings import Settings
from vmplane.store.db import transaction


class OperationError(UsageError):
    """An operation's arguments do not fit the environment (exit code 2, HTTP 422)."""


@dataclass
class OperationPlan:
    kind: str
    job: JobView
    params: dict[str, Any]
    steps: list[str]
    plan: Plan
    spec: EnvSpec | None = None
    config_updates: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # said on stderr before the confirmation
    json_extra: dict[str, Any] = field(default_factory=dict)  # fields added to the command's `-o json` result


def plan_attach_lb(job: JobView, lb: LoadBalancer | None) -> OperationPlan:
    jobs.require_provisioned(job.id, job.status)
    if job.infra.LoadBalancerID and job.spec.load_balancer is not None:
        raise JobConflictError(f"{job.env} already has a load balancer ({job.infra.LoadBalancerDNSName})")
    block = lb or job.spec.load_balancer
    if block is None and job.config.get("detachedLoadBalancer"):
        block = LoadBalancer.model_validate(job.config["detachedLoadBalancer"])
    if block is None:
        raise OperationError(f"{job.env} has no loadBalancer block to attach: pass -f FILE with one")
    lb_part = driver_for(job.target).lb
    if lb_part is None:
        raise OperationError(f"{job.target.cloud.value} has no load balancer vmplane can create")
    spec = job.spec.model_copy(update={"load_balancer": block})
    steps = [*LB_STEPS, "stepRegisterSpace"]
    plan = Plan(PlanKind.attach_lb, job.env, job.target.describe(), steps, lb_part.resources(spec))
    plan.cost = plan_cost(job.spec, spec)
    return OperationPlan("attach_lb", job, {"domain": block.domain}, steps, plan, spec=spec)


def plan_detach_lb(job: JobView) -> OperationPlan:
    jobs.require_provisioned(job.id, job.status)
    if job.spec.load_balancer is None and not job.infra.LoadBalancerID:
        raise JobConflictError(f"{job.env} has no load balancer attached")
    spec = job.spec.model_copy(update={"load_balancer": None})
    steps = ["stepDetachLoadBalancer", "stepRegisterSpace"]
    lb_part = driver_for(job.target).lb
    resources = lb_part.teardown_resources(job.infra) if lb_part is not None else []
    plan = Plan(PlanKind.detach_lb, job.env, job.target.describe(), steps, resources)
    plan.notes.append("the VMs keep running; their ingress goes back to what it was before the load balancer")
    updates = {"detachedLoadBalancer": jobs.spec_json(job.spec)["loadBalancer"]} if job.spec.load_balancer else {}
    return OperationPlan("detach_lb", job, {}, steps, plan, spec=spec, config_updates=updates)


def plan_scale(
    job: JobView,
    pool: str,
    *,
    min_size: int | None,
    max_size: int | None,
    desired: int | None,
    file: EnvSpec | None = None,
    file_name: str = "the file",
) -> OperationPlan:
    """`file` (read from `file_name`): the environment file to compare the new sizes with; without it, the
    sizes the last apply recorded."""
    jobs.require_provisioned(job.id, job.status)
    current = job.spec.pools.get(pool)
    if current is None:
        raise OperationError(f"no pool {pool!r} in {job.env} (pools: {', '.join(job.spec.pools)})")
    if min_size is None and max_size is None and desired is None:
        raise OperationError("give at least one of --min, --max, --desired")
    if isinstance(current, FixedPool):
        if min_size is not None or max_size is not None:
            raise OperationError(f"pool {pool} is fixed: only --desired (its size) applies")
        assert desired is not None
        new_pool: FixedPool | AsgPool = _revalidate(current, {"size": desired}, pool)
        detail = f"size {current.size} -> {desired}"
    else:
        sizes = {"min": min_size, "max": max_size, "desired": desired}
        new_pool = _revalidate(current, {k: v for k, v in sizes.items() if v is not None}, pool)
        assert isinstance(new_pool, AsgPool)
        before, after = (current.min, current.desired, current.max), (new_pool.min, new_pool.desired, new_pool.max)
        detail = "min/desired/max {}/{}/{} -> {}/{}/{}".format(*before, *after)
    spec = job.spec.model_copy(update={"pools": {**job.spec.pools, pool: new_pool}})
    steps = ["stepScalePool", "stepRegisterSpace"]
    resources = size_resources(driver_for(job.target), job.spec, spec, job.infra, step="stepScalePool")
    plan = Plan(
        PlanKind.scale, job.env, job.target.describe(), steps, resources, headline=f"Scale: pool {pool} {detail}."
    )
    was, now = size_fields(current), size_fields(new_pool)
    plan.changed_fields = sum(1 for k in now if was[k] != now[k])  # counted as an update's size fields are
    if not any(r.action is Action.destroy for r in resources):
        plan.notes.append("running VMs stay")
    plan.cost = plan_cost(job.spec, spec)
    # Without a file given, what it says is what the last apply recorded, carried over earlier scales.
    in_file = file_sizes(job, pool, file, file_name)
    drifted = drift(in_file, now, pool)
    params = {"pool": pool, "min": min_size, "max": max_size, "desired": desired, "file": in_file}
    op = OperationPlan("scale", job, params, steps, plan, spec=spec)
    op.warnings = [drift_warning(job.env, drifted, file_name if file else None)] if drifted else []
    op.json_extra = {"fileDrift": [d.to_json() for d in drifted]}
    return op


def _revalidate(pool: FixedPool | AsgPool, updates: dict[str, int], name: str) -> FixedPool | AsgPool:
    from pydantic import ValidationError

    try:
        return type(pool).model_validate({**pool.model_dump(), **updates})
    except ValidationError as err:
        reasons = "; ".join(e["msg"] for e in err.errors())
        raise OperationError(f"pools.{name}: {reasons}") from None


def plan_rotate(job: JobView, pool: str | None) -> OperationPlan:
    jobs.require_provisioned(job.id, job.status)
    if pool is not None and pool not in job.spec.pools:
        raise OperationError(f"no pool {pool!r} in {job.env} (pools: {', '.join(job.spec.pools)})")
    outdated = [v for v in job.infra.outdated_vms() if pool is None or v.Pool == pool]
    # Replacing a stopped pool's VMs would start them (and wait for a bootstrap nobody asked for).
    for name in sorted({v.Pool for v in outdated}):
        if reason := stopped_reason(job, name):
            raise OperationError(f"cannot rotate: {reason}")
    steps = ["stepRotateVMs", "stepRegisterSpace"]
    plan = Plan(PlanKind.rotate, job.env, job.target.describe(), steps, [])
    for v in outdated:
        how = "rolling replacement by the cloud" if isinstance(job.spec.pools[v.Pool], AsgPool) else "one at a time"
        plan.notes.append(
            f"{v.Name} ({v.ID}) v{v.LaunchTemplateVersion} -> v{job.infra.LaunchTemplateVersion[v.Pool]} ({how})"
        )
    plan.headline = f"Rotate: {len(outdated)} VMs to replace."
    if not outdated:
        plan.notes.append("every VM runs its pool's current launch template version: nothing to replace")
    return OperationPlan("rotate", job, {"pool": pool} if pool else {}, steps, plan)


def begin_operation(settings: Settings, op: OperationPlan, expected_version: int | None = None) -> OperationRecord:
    with transaction(settings.db_url) as s:
        return jobs.begin_operation(
            s,
            op.job.id,
            op.kind,
            op.params,
            op.steps,
            spec=op.spec,
            config_updates=op.config_updates,
            expected_version=expected_version,
        )
