"""Stopping and starting pools now (`vmplane stop|start ENV [POOL]`), as durable operations."""

from __future__ import annotations

from datetime import UTC, datetime

from vmplane.clouds.registry import driver_for
from vmplane.envspec.models import AsgPool
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobView
from vmplane.jobs.vmops import OperationError, OperationPlan
from vmplane.pipeline.plan import Plan, PlanKind
from vmplane.state import VMState


def _pools(job: JobView, pool: str | None) -> list[str]:
    if pool is not None and pool not in job.spec.pools:
        raise OperationError(f"no pool {pool!r} in {job.env} (pools: {', '.join(job.spec.pools)})")
    return [pool] if pool else sorted(job.spec.pools)


def _check_driver(job: JobView, verb: str) -> None:
    driver = driver_for(job.target)
    if not driver.capabilities.schedules:
        raise OperationError(f"the {job.target.cloud.value} driver cannot {verb} pools")


def plan_stop(job: JobView, pool: str | None) -> OperationPlan:
    jobs.require_provisioned(job.id, job.status)
    _check_driver(job, "stop")
    names = _pools(job, pool)
    plan = Plan(PlanKind.stop, job.env, job.target.describe(), ["stepStopPools", "stepRegisterSpace"], [])
    for name in names:
        count = sum(1 for v in job.infra.VMs if v.Pool == name and v.State is not VMState.terminated)
        if name in job.infra.StoppedPools:
            plan.notes.append(f"pool {name} is already stopped")
        elif isinstance(job.spec.pools[name], AsgPool):
            plan.notes.append(
                f"pool {name}: its scaling group goes to 0; its {count} VMs are terminated, and `vmplane start` "
                "launches new ones from the current template"
            )
        else:
            plan.notes.append(f"pool {name}: {count} VMs stopped; their disks stay (and are still billed)")
        if job.spec.pools[name].schedule is not None:
            plan.notes.append(f"pool {name}: its schedule is paused until `vmplane start` (nothing starts it)")
    plan.headline = f"Stop: {', '.join(names)}."
    return OperationPlan("stop", job, {"pool": pool} if pool else {}, plan.steps, plan)


def plan_start(job: JobView, pool: str | None) -> OperationPlan:
    jobs.require_provisioned(job.id, job.status)
    _check_driver(job, "start")
    names = _pools(job, pool)
    plan = Plan(PlanKind.start, job.env, job.target.describe(), ["stepStartPools", "stepRegisterSpace"], [])
    now = datetime.now(UTC)
    for name in names:
        p = job.spec.pools[name]
        stopped = name in job.infra.StoppedPools or any(
            v.State is VMState.stopped for v in job.infra.VMs if v.Pool == name
        )
        if not stopped and (p.schedule is None or p.schedule.is_running_at(now)):
            plan.notes.append(f"pool {name} is running: nothing to start")
        else:
            plan.notes.append(f"pool {name}: started, then checked ready as after an apply")
        if p.schedule is not None:
            plan.notes.append(f"pool {name}: its schedule runs again (the next stop stops it)")
    plan.headline = f"Start: {', '.join(names)}."
    return OperationPlan("start", job, {"pool": pool} if pool else {}, plan.steps, plan)
