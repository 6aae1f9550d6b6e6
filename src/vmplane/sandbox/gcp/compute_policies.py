"""Resource policies (regional; instance schedules are the kind vmplane uses) and the instances that
follow them (`instances.addResourcePolicies` / `removeResourcePolicies`, the instance's `resourcePolicies`).

What Google refuses that the sandbox can know: a cron that is not five unix-cron fields, a `timeZone`
outside the tz database, attaching a policy that does not exist (404) or lives in another region, a
second instance schedule on one VM, and deleting a policy a VM still follows (400
resourceInUseByAnotherResource, from the generic in-use scan over the instance's `resourcePolicies`).

The sandbox never fires a schedule: no VM starts or stops by itself; tests check the policy and its
attachments, and stop/start through `instances.stop` / `instances.start`.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vmplane.sandbox.gcp.compute import Call, Kind, handler, register
from vmplane.sandbox.gcp.errors import invalid, not_found
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, parse_ref, self_link

# minute, hour, day of month, month, day of week (0 and 7 are Sunday); names as cron allows them
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_ITEM = re.compile(r"^(\*|(\d+)(?:-(\d+))?)(?:/(\d+))?$")
_NAMES = re.compile(r"^[A-Za-z]{3}(?:-[A-Za-z]{3})?$")


def check_cron(text: object, where: str, *, optional_year: bool = False) -> None:
    """Unix cron (scaling schedules may add a sixth field, the year)."""
    fields = str(text or "").split()
    if len(fields) not in ((5, 6) if optional_year else (5,)):
        raise invalid(f"Invalid value for field '{where}': '{text}'. Expected a unix-cron expression.")
    for i, field in enumerate(fields[:5]):
        low, high = _RANGES[i]
        for item in field.split(","):
            found = _ITEM.match(item)
            if found is None and i in (3, 4) and _NAMES.match(item):
                continue
            numbers = [int(n) for n in (found.groups()[1:3] if found else ()) if n is not None]
            if found is None or any(not low <= n <= high for n in numbers):
                raise invalid(f"Invalid value for field '{where}': '{text}'. '{item}' is out of range.")


def check_zone(zone: object, where: str) -> None:
    if zone is None:
        return
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid(f"Invalid value for field '{where}': '{zone}'. Not a tz database time zone.") from None


def _prepare(call: Call, r: Resource) -> None:
    schedule = r.get("instanceSchedulePolicy")
    if schedule is not None:
        where = "resource.instanceSchedulePolicy"
        if not (schedule.get("vmStartSchedule") or schedule.get("vmStopSchedule")):
            raise invalid(f"Invalid value for field '{where}': a vmStartSchedule or a vmStopSchedule is required.")
        for key in ("vmStartSchedule", "vmStopSchedule"):
            if key in schedule:
                check_cron((schedule[key] or {}).get("schedule"), f"{where}.{key}.schedule")
        check_zone(schedule.get("timeZone"), f"{where}.timeZone")
    r["status"] = "READY"


POLICIES = Kind("resourcePolicies", "ResourcePolicy", "resource policy", prepare=_prepare)
register("resourcePolicies", POLICIES, ("insert", "get", "list", "delete"))


def _is_schedule(call: Call, link: str) -> bool:
    project, key = parse_ref(link, call.project.id, "resourcePolicies")
    return "instanceSchedulePolicy" in call.state.project(project).compute.get(key, {})


@handler("compute.instances.addResourcePolicies")
def _attach(call: Call) -> Resource:
    instance = call.get()
    region = instance["zone"].rsplit("/", 1)[1].rsplit("-", 1)[0]
    links = []
    for i, given in enumerate(require_body(call.body).get("resourcePolicies", [])):
        project, key = parse_ref(given, call.project.id, f"resourcePolicies[{i}]")
        if call.state.project(project).compute.get(key, {}).get("kind") != "compute#resourcePolicy":
            raise not_found(f"projects/{project}/{key}")
        if not key.startswith(f"regions/{region}/"):
            raise invalid(
                f"Invalid value for field 'resourcePolicies[{i}]': '{given}'. "
                f"The resource policy must be in the instance's region {region}."
            )
        links.append(self_link(project, key))
    have: list[str] = instance.setdefault("resourcePolicies", [])
    schedules = {link for link in [*have, *links] if _is_schedule(call, link)}
    if len(schedules) > 1:
        raise invalid("Invalid value for field 'resourcePolicies': an instance can follow one instance schedule only.")
    have.extend(link for link in links if link not in have)
    return call.operation("addResourcePolicies", instance)


@handler("compute.instances.removeResourcePolicies")
def _detach(call: Call) -> Resource:
    instance = call.get()
    given = require_body(call.body).get("resourcePolicies", [])
    gone = {self_link(*parse_ref(g, call.project.id, f"resourcePolicies[{i}]")) for i, g in enumerate(given)}
    kept = [link for link in instance.get("resourcePolicies", []) if link not in gone]
    if kept:
        instance["resourcePolicies"] = kept
    else:
        instance.pop("resourcePolicies", None)
    return call.operation("removeResourcePolicies", instance)
