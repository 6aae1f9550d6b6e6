"""The one answer to "is this pool running?" that rotate and exec ask before they reach for a VM.

A pool is stopped on purpose in two ways: `vmplane stop` (recorded: `infra.StoppedPools`, the VMs'
`stopped` state), or its schedule, which the cloud's own scheduler runs while vmplane may be down; the
record cannot know about that, so the schedule itself is read for the current time.
"""

from __future__ import annotations

from datetime import UTC, datetime

from vmplane.state import VMState
from vmplane.store.job_records import JobView


def stopped_reason(job: JobView, pool: str, at: datetime | None = None) -> str | None:
    """Why `pool` is not running now, or None if it should be. Names what starts it again."""
    if pool in job.infra.StoppedPools:
        return f"pool {pool} is stopped (`vmplane stop`): `vmplane start {job.env} {pool}` starts it"
    schedule = job.spec.pools[pool].schedule if pool in job.spec.pools else None
    now = at or datetime.now(UTC)
    if schedule is not None and not schedule.is_running_at(now):
        _, when = schedule.next_change(now)
        return (
            f"pool {pool} is outside its schedule's hours ({schedule.days} {schedule.start}-{schedule.stop} "
            f"{schedule.timezone}): the cloud's scheduler stopped it until {when:%a %Y-%m-%d %H:%M %Z}; "
            f"`vmplane start {job.env} {pool}` starts it now"
        )
    stopped = [v.Name for v in job.infra.VMs if v.Pool == pool and v.State is VMState.stopped]
    if stopped:
        return (
            f"pool {pool}: {', '.join(stopped)} were stopped when vmplane last looked (by its schedule or outside "
            f"vmplane): `vmplane start {job.env} {pool}` starts them"
        )
    return None


def pool_states(job: JobView, at: datetime | None = None) -> dict[str, dict[str, str | None]]:
    """Per pool: `running` or `stopped`, why it is stopped, its schedule and its next change (for `status`)."""
    now = at or datetime.now(UTC)
    out: dict[str, dict[str, str | None]] = {}
    for name, pool in job.spec.pools.items():
        reason = stopped_reason(job, name, now)
        s = pool.schedule
        change = None
        if s is not None:
            kind, when = s.next_change(now)
            change = f"{kind} {when:%a %Y-%m-%d %H:%M %Z}"
        out[name] = {
            "state": "stopped" if reason else "running",
            "reason": reason,
            "schedule": f"{s.days} {s.start}-{s.stop} {s.timezone}" if s else None,
            "nextChange": change,
        }
    return out
