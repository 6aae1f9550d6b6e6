"""Regional autoscalers: stored and checked, and they never scale (no guest reports CPU, and no clock
fires a scaling schedule): `recommendedSize` is the group's targetSize.

PATCH is a JSON merge patch, as Google documents for autoscalers, so a scaling schedule left out of a
patch stays; PUT replaces the autoscaler. Scaling schedules are checked as Google documents them: at
least one other autoscaling signal beside them, `durationSec` at least 300, `schedule` and
`minRequiredReplicas` required, at most 128, a tz database `timeZone`.
"""

from __future__ import annotations

from vmplane.sandbox.gcp.compute import Call, Kind, Resolve, key_of, register
from vmplane.sandbox.gcp.compute_policies import check_cron, check_zone
from vmplane.sandbox.gcp.errors import invalid
from vmplane.sandbox.gcp.store import Resource

SIGNALS = ("cpuUtilization", "loadBalancingUtilization", "customMetricUtilizations")
MAX_SCHEDULES = 128
MIN_DURATION_SEC = 300


def _refs(r: Resource, ref: Resolve) -> None:
    if "target" in r:  # a patch may leave it out: then it stays as stored
        r["target"] = ref("resource.target", r["target"], ("instanceGroupManagers",))


def _check_schedules(policy: Resource) -> None:
    schedules = policy.get("scalingSchedules") or {}
    where = "resource.autoscalingPolicy.scalingSchedules"
    if not schedules:
        return
    if not any(policy.get(s) for s in SIGNALS):
        raise invalid(
            f"Invalid value for field '{where}': scaling schedules need at least one other autoscaling policy "
            "(CPU utilization, load balancing serving capacity or Cloud Monitoring metrics)."
        )
    if len(schedules) > MAX_SCHEDULES:
        raise invalid(f"Invalid value for field '{where}': at most {MAX_SCHEDULES} scaling schedules are allowed.")
    for name, s in schedules.items():
        here = f"{where}[{name}]"
        for required in ("schedule", "minRequiredReplicas", "durationSec"):
            if s.get(required) is None:
                raise invalid(f"Invalid value for field '{here}.{required}': the field is required.")
        if int(s["durationSec"]) < MIN_DURATION_SEC:
            raise invalid(f"Invalid value for field '{here}.durationSec': '{s['durationSec']}'. Must be at least 300.")
        check_cron(s["schedule"], f"{here}.schedule", optional_year=True)
        check_zone(s.get("timeZone"), f"{here}.timeZone")
        s.setdefault("timeZone", "UTC")


def _prepare(call: Call, r: Resource) -> None:
    if not r.get("target"):
        raise invalid("Invalid value for field 'resource.target': ''. The target is required.")
    policy = r.setdefault("autoscalingPolicy", {})
    low, high = policy.get("minNumReplicas", 1), policy.get("maxNumReplicas")
    if high is None or not 0 <= int(low) <= int(high):
        raise invalid("Invalid value for field 'resource.autoscalingPolicy.maxNumReplicas': must be >= minNumReplicas.")
    target = policy.get("cpuUtilization", {}).get("utilizationTarget")
    if target is not None and not 0 < float(target) <= 1:
        raise invalid(
            f"Invalid value for field 'resource.autoscalingPolicy.cpuUtilization.utilizationTarget': '{target}'."
        )
    _check_schedules(policy)
    policy.setdefault("mode", "ON")
    policy.setdefault("coolDownPeriodSec", 60)
    mig = call.project.compute[key_of({"selfLink": r["target"]})]
    r.update(status="ACTIVE", recommendedSize=int(mig["targetSize"]))
    # Google reports each schedule's state; the sandbox knows no next start time (it runs no clock).
    schedules = policy.get("scalingSchedules") or {}
    status = {n: {"state": "DISABLED" if s.get("disabled") else "READY"} for n, s in schedules.items()}
    if status:
        r["scalingScheduleStatus"] = status
    else:
        r.pop("scalingScheduleStatus", None)


register(
    "regionAutoscalers",
    Kind("autoscalers", "Autoscaler", "autoscaler", _refs, _prepare),
    ("insert", "get", "list", "delete", "merge_patch", "update"),
)
