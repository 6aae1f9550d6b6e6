"""A pool's `schedule` in Google's terms, pure (no cloud calls): what stepValidate refuses, the instance
schedule resource policy of a Fixed pool, and the scaling schedule of an auto-scaled pool's autoscaler.

- Fixed pools: a regional `resourcePolicies` instance schedule (`vmStartSchedule` / `vmStopSchedule` in
  unix cron, in the schedule's time zone, so daylight saving moves with it) that the pool's VMs follow.
- Auto-scaled pools (MIGs): one named `scalingSchedules` entry on the autoscaler: from the start cron, for
  the window's length (`durationSec`), at least `minRequiredReplicas` VMs; outside it the autoscaler's
  `minNumReplicas` is 0. Google documents that a scaling schedule works only beside another autoscaling
  signal and lasts at least 5 minutes, so both are refused here, naming the field. `durationSec` is a
  fixed length: on the night daylight saving changes, the stop comes an hour early or late.
"""

from __future__ import annotations

import hashlib
from typing import Any

from vmplane.clouds.base import Tagger
from vmplane.clouds.gcp import naming, ownership
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.envspec.schedule import Schedule
from vmplane.state import InfraConfig

SCALING_SCHEDULE = "vmplane-running-hours"  # the autoscaler's one schedule vmplane owns (by this key)
MIN_DURATION_SEC = 300  # Google's minimum for a scaling schedule


def digest(schedule: Schedule) -> str:
    """What names a schedule's policy: its zone and both crons (equal schedules share a digest)."""
    text = f"{schedule.timezone}|{schedule.cron('start', 'unix')}|{schedule.cron('stop', 'unix')}"
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def policy_name(spec: EnvSpec, pool_name: str, schedule: Schedule) -> str:
    return naming.schedule_policy(spec, pool_name, digest(schedule))


def window_seconds(schedule: Schedule) -> int:
    return round(schedule.hours_per_day() * 3600)


def wanted_policies(spec: EnvSpec, infra: InfraConfig) -> dict[str, str]:
    """Fixed pool -> the policy its VMs must follow. A pool `vmplane stop` stopped follows none: a scheduled
    start would undo the stop (it stays stopped until `vmplane start`)."""
    return {
        name: policy_name(spec, name, pool.schedule)
        for name, pool in spec.pools.items()
        if isinstance(pool, FixedPool) and pool.schedule is not None and name not in infra.StoppedPools
    }


def policy_resource(tagger: Tagger, name: str, schedule: Schedule) -> Any:
    from google.cloud import compute_v1 as c

    return c.ResourcePolicy(
        name=name,
        description=ownership.description(tagger, "schedule"),
        instance_schedule_policy=c.ResourcePolicyInstanceSchedulePolicy(
            time_zone=schedule.timezone,
            vm_start_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule=schedule.cron("start", "unix")),
            vm_stop_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule=schedule.cron("stop", "unix")),
        ),
    )


def required_replicas(pool: AsgPool) -> int:
    """The pool's `min`, so inside the window the group behaves as an unscheduled one (CPU between min and
    max; `desired` would hold it above desired all day); at least 1, or the window would start nothing."""
    return max(pool.min, 1)


def scaling_schedule(pool: AsgPool, schedule: Schedule) -> Any:
    from google.cloud import compute_v1 as c

    return c.AutoscalingPolicyScalingSchedule(
        schedule=schedule.cron("start", "unix"),
        duration_sec=window_seconds(schedule),
        min_required_replicas=required_replicas(pool),
        time_zone=schedule.timezone,
        description=f"vmplane: {schedule.days} {schedule.start}-{schedule.stop} ({schedule.timezone})",
    )


def problems(spec: EnvSpec, *, cpu_signal: bool = False) -> list[str]:
    """What Google cannot run, each naming the field (stepValidate, before anything is created).
    `cpu_signal`: every autoscaler follows CPU anyway (the generated stack's do)."""
    out = []
    for name, pool in spec.pools.items():
        if not isinstance(pool, AsgPool) or pool.schedule is None:
            continue
        if pool.target_cpu_percent is None and not cpu_signal:
            out.append(
                f"pools.{name}.schedule: on Google Cloud an auto-scaled pool's schedule is a scaling schedule of "
                f"its autoscaler, which Google runs only beside another autoscaling signal: set "
                f"pools.{name}.targetCpuPercent"
            )
        if window_seconds(pool.schedule) < MIN_DURATION_SEC:
            out.append(
                f"pools.{name}.schedule: the pool would run {window_seconds(pool.schedule) // 60} minutes a day; "
                f"Google's scaling schedules last at least {MIN_DURATION_SEC // 60} minutes"
            )
    return out
