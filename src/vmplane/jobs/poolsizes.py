"""What a change of pool sizes does to the VMs, and where a `vmplane scale` leaves the file behind.

An update plan and a scale plan list the VMs a size change adds (`+`) and removes (`-`), named as the
job's record names them, so a smaller size reads as the destruction it is. The rules follow the drivers':
a smaller Fixed pool removes its highest-numbered VMs (`Index >= size`, on every cloud); an auto-scaling
group set below the instances it holds terminates the difference, and the cloud's termination policy, not
vmplane, picks which, so those lines count the instances that go and list the candidates.

`vmplane scale` changes the job's recorded spec, not the file: the next `apply` of the unchanged file sets
the old sizes again. A scale records the file's sizes (those of the last apply or update, carried over
earlier scales) in its params, so the next scale and `plan` can say which field of the file disagrees.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vmplane.clouds.base import Action, CloudDriver, PlannedResource
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.errors import UsageError
from vmplane.state import InfraConfig, VMRecord, VMState
from vmplane.store.job_records import JobView

VM_STEP = "stepCreateVMs"


def size_fields(pool: FixedPool | AsgPool) -> dict[str, int]:
    """The sizes of a pool that `scale` changes, by their file field name."""
    if isinstance(pool, FixedPool):
        return {"size": pool.size}
    return {"min": pool.min, "desired": pool.desired, "max": pool.max}


def size_resources(
    driver: CloudDriver,
    old: EnvSpec,
    new: EnvSpec,
    infra: InfraConfig,
    step: str = VM_STEP,
    now: datetime | None = None,
) -> list[PlannedResource]:
    """The VMs going from `old` (the job's recorded spec) to `new` adds and removes, in `step`.

    Added: the driver's own stepCreateVMs lines (its resource types and names) that `new` has more of than
    `old` (a multiset: Proxmox names every VM's cloud-init ISO alike), less what the record already holds.
    Removed: the recorded VMs themselves (name and cloud id)."""
    before = Counter((r.type, r.name) for r in driver.provision_resources(old, infra) if r.step == VM_STEP)
    after = [r for r in driver.provision_resources(new, infra) if r.step == VM_STEP]
    types = {name: type_ for type_, name in before} | {r.name: r.type for r in after}
    recorded = {v.Name for v in infra.VMs if v.ID}
    out: list[PlannedResource] = []
    for r in after:
        key = (r.type, r.name)
        if before[key] > 0:
            before[key] -= 1
        elif r.name not in recorded:
            out.append(PlannedResource(Action.create, r.type, r.name, step, r.detail))
    for name, pool in new.pools.items():
        was = old.pools.get(name)
        if isinstance(pool, FixedPool) and isinstance(was, FixedPool):
            out.extend(_fixed_removed(infra, name, pool, types, step))
        elif isinstance(pool, AsgPool) and isinstance(was, AsgPool) and name not in infra.StoppedPools:
            out.extend(_group_delta(driver, infra, name, pool, step, now or datetime.now(UTC)))
    return out


def _fixed_removed(
    infra: InfraConfig, pool_name: str, pool: FixedPool, types: dict[str, str], step: str
) -> list[PlannedResource]:
    """The highest-numbered VMs, as every driver's shrink removes them (those with a cloud id: an intent
    without one has nothing to terminate)."""
    gone = sorted((v for v in infra.VMs if v.Pool == pool_name and v.Index >= pool.size and v.ID), key=_order)
    drained = " after leaving the load balancer" if infra.LoadBalancerID else ""
    detail = f"terminated{drained} (pool {pool_name} size {pool.size} keeps its lowest-numbered VMs)"
    return [PlannedResource(Action.destroy, types.get(v.Name, "vm"), v.Name, step, f"{v.ID}: {detail}") for v in gone]


def _group_delta(
    driver: CloudDriver, infra: InfraConfig, pool_name: str, pool: AsgPool, step: str, now: datetime
) -> list[PlannedResource]:
    """An auto-scaling group set to `desired`: one line per instance it launches or terminates, counted
    against the instances recorded at the last apply or scale (its own scaling may have moved since).
    Which instances go is the cloud's choice (its termination policy), so the lines name the group and
    the candidates, not one VM each."""
    running = sorted(
        (v for v in infra.VMs if v.Pool == pool_name and v.ID and v.State is not VMState.terminated), key=_order
    )
    if not running and pool.schedule is not None and not pool.schedule.is_running_at(now):
        return []  # the apply keeps a group its schedule stopped at 0 until the scheduled start
    group = infra.ScalingGroupID.get(pool_name, pool_name)
    types = {r.name: r.type for r in driver.teardown_resources(infra)}
    vm_type = types.get(str(running[0].ID), "vm") if running else "vm"
    delta = pool.desired - len(running)
    if delta > 0:
        detail = f"launched by the group (desired {pool.desired}, {len(running)} recorded)"
        return [PlannedResource(Action.create, vm_type, f"{group}[+{i + 1}]", step, detail) for i in range(delta)]
    candidates = ", ".join(str(v.ID) for v in running)
    detail = (
        f"one of {candidates}: the group's termination policy picks which "
        f"(desired {pool.desired}, {len(running)} recorded)"
    )
    return [PlannedResource(Action.destroy, vm_type, f"{group}[-{i + 1}]", step, detail) for i in range(-delta)]


def _order(v: VMRecord) -> tuple[int, str]:
    return (v.Index, v.Name)


# ---- the file against the record, after `vmplane scale` ----


@dataclass(frozen=True)
class Drift:
    """A size `scale` set that the file (as last applied) does not say."""

    path: str  # the file's field: pools.<name>.<size|min|desired|max>
    file: int
    scaled: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "file": self.file, "scaled": self.scaled}


def _operations(job: JobView) -> list[dict[str, Any]]:
    """The job's operations, newest first (the history holds the last 50)."""
    ops = [*job.config.get("operationHistory", []), job.config.get("operation")]
    return [op for op in reversed(ops) if op]


def last_scale(job: JobView, pool: str) -> dict[str, Any] | None:
    """The scale of `pool` since the last update (the last time the recorded spec was the file's), if any."""
    for op in _operations(job):
        if op.get("kind") == "update":
            return None
        if op.get("kind") == "scale" and (op.get("params") or {}).get("pool") == pool:
            return op
    return None


def file_sizes(job: JobView, pool: str, file: EnvSpec | None = None, where: str = "the file") -> dict[str, int]:
    """The pool's sizes in `file` if given, else as the file said at the last apply or update: a scale since
    then recorded them in its params (one recorded before scales did is taken as the file: the sizes it left
    are all there is). An apply that found nothing to change records nothing, so a file edited to the
    scaled sizes is seen only when given."""
    current = size_fields(job.spec.pools[pool])
    if file is not None:
        return _sizes_in(file, where, job, pool)
    op = last_scale(job, pool)
    recorded = (op.get("params") or {}).get("file") if op else None
    if isinstance(recorded, dict) and set(recorded) == set(current):
        return {k: int(v) for k, v in recorded.items()}
    return current


def _sizes_in(file: EnvSpec, where: str, job: JobView, pool: str) -> dict[str, int]:
    if (file.org, file.name) != (job.org, job.env):
        raise UsageError(f"{where} is for {file.org}/{file.name}, not {job.org}/{job.env}; nothing was changed")
    ours, theirs = job.spec.pools[pool], file.pools.get(pool)
    if theirs is None or type(theirs) is not type(ours):
        kind = "fixed" if isinstance(ours, FixedPool) else "asg"
        raise UsageError(f"{where}: pools.{pool} is not a {kind} pool there, as in {job.env}; nothing was changed")
    return size_fields(theirs)


def drift(file: dict[str, int], scaled: dict[str, int], pool: str) -> list[Drift]:
    return [Drift(f"pools.{pool}.{k}", file[k], scaled[k]) for k in scaled if file.get(k) != scaled[k]]


def drift_warning(env: str, items: list[Drift], where: str | None = None) -> str:
    """What `scale` says when the file (`where`, else as last applied) no longer matches what the cloud
    will hold."""
    says = ", ".join(f"{d.path} {d.file}" for d in items)
    now = ", ".join(f"{d.path} to {d.scaled}" for d in items)
    source = where or f"the environment file of {env} (as last applied)"
    return (
        f"{source} says {says}: set {now} in the file to keep this scale; "
        f"`vmplane apply` of the unchanged file undoes it"
    )


def scaled_notes(job: JobView, spec: EnvSpec) -> list[str]:
    """For `plan`/`apply` of a file: the size fields it sets back that a `vmplane scale` had changed."""
    notes = []
    for name, pool in spec.pools.items():
        was = job.spec.pools.get(name)
        op = last_scale(job, name)
        if was is None or op is None or type(was) is not type(pool):
            continue
        recorded, wanted = size_fields(was), size_fields(pool)
        undone = [k for k in wanted if recorded[k] != wanted[k]]
        if undone:
            fields = ", ".join(f"pools.{name}.{k} {recorded[k]} -> {wanted[k]}" for k in undone)
            notes.append(
                f"`vmplane scale` ({op.get('id')}) set pool {name}'s sizes; this file sets them back ({fields}): "
                f"put the scaled values in the file to keep them"
            )
    return notes
