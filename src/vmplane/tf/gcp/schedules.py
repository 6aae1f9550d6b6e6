"""Pool schedules in the GCP stack: a `google_compute_resource_policy` instance schedule per scheduled Fixed
pool (the pool's instances list it in `resource_policies`), and a `scaling_schedules` block on a scheduled
auto-scaled pool's autoscaler (min 0 outside the window). As the direct pipeline does (clouds/gcp/
schedule_policy.py).

The crons are computed in HCL from `local.cloud.pools[*].schedule`, as envspec/schedule.py's `cron()`
computes them, so editing a schedule changes only the infra inputs file; these blocks appear only when a
pool has a schedule, so a stack without one is unchanged. Google runs instance schedules as the project's
Compute Engine Service Agent, which needs compute.instances.start/stop: this stack, like vmplane, grants
nothing to Google's agents (see the README).
"""

from __future__ import annotations

from vmplane.clouds.gcp.schedule_policy import SCALING_SCHEDULE
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.tf.gcp.common import E, description
from vmplane.tf.hcl import Block, Comment, Item


def fixed_scheduled(spec: EnvSpec) -> bool:
    return any(isinstance(p, FixedPool) and p.schedule is not None for p in spec.pools.values())


def asg_scheduled(spec: EnvSpec) -> bool:
    return any(isinstance(p, AsgPool) and p.schedule is not None for p in spec.pools.values())


def schedule_locals() -> Block:
    loc = Block("locals")
    loc.comment("Each pool's schedule as Google's schedulers read it: unix cron in the schedule's zone (Sunday 0).")
    loc.attr("day_index", {"Mon": 0, "Tue": 1, "Wed": 2, "Thu": 3, "Fri": 4, "Sat": 5, "Sun": 6})
    loc.attr(
        "schedules",
        E("{\n    for name, p in local.cloud.pools : name => p.schedule if try(p.schedule, null) != null\n  }"),
    )
    # `Mon-Fri`, `Mon,Wed`, `Fri-Mon` (wraps the week): each part's first and last day index.
    loc.attr(
        "schedule_parts",
        E(
            "{\n"
            "    for name, s in local.schedules : name => [\n"
            '      for part in split(",", s.days) : {\n'
            '        a = local.day_index[split("-", trimspace(part))[0]]\n'
            '        b = local.day_index[reverse(split("-", trimspace(part)))[0]]\n'
            "      }\n"
            "    ]\n"
            "  }"
        ),
    )
    loc.attr(
        "schedule_days",
        E(
            "{\n"
            "    for name, parts in local.schedule_parts : name => distinct(flatten([\n"
            "      for r in parts : [for i in range(r.a, r.b + (r.b < r.a ? 7 : 0) + 1) : i % 7]\n"
            "    ]))\n"
            "  }"
        ),
    )
    loc.attr(
        "schedule_minutes",
        E(
            "{\n"
            "    for name, s in local.schedules : name => {\n"
            '      start = tonumber(split(":", s.start)[0]) * 60 + tonumber(split(":", s.start)[1])\n'
            '      stop  = tonumber(split(":", s.stop)[0]) * 60 + tonumber(split(":", s.stop)[1])\n'
            "    }\n"
            "  }"
        ),
    )
    # An overnight schedule (stop before start) stops on the next day.
    loc.attr(
        "schedule_cron",
        E(
            "{\n"
            "    for name, m in local.schedule_minutes : name => {\n"
            "      timeZone = local.schedules[name].timezone\n"
            '      start = format("%d %d * * %s", m.start % 60, floor(m.start / 60), join(",", sort([\n'
            "        for d in local.schedule_days[name] : tostring((d + 1) % 7)\n"
            "      ])))\n"
            '      stop = format("%d %d * * %s", m.stop % 60, floor(m.stop / 60), join(",", sort([\n'
            "        for d in local.schedule_days[name] : tostring((d + 1 + (m.stop < m.start ? 1 : 0)) % 7)\n"
            "      ])))\n"
            "      durationSec = (m.stop - m.start + 1440) % 1440 * 60\n"
            "    }\n"
            "  }"
        ),
    )
    return loc


def resource_policy() -> list[Item]:
    policy = Block("resource", ["google_compute_resource_policy", "schedule"])
    policy.attr(
        "for_each",
        E('{ for name, c in local.schedule_cron : name => c if local.identity.pools[name].mode == "fixed" }'),
    )
    policy.comment(
        "Google cannot change a policy VMs follow: a new schedule is a new policy (a digest of it in the\n"
        "name), made and followed before the old one goes."
    )
    policy.attr(
        "name",
        E(
            'format("%s-%s", substr("${local.base}-${each.key}", 0, 54), '
            'substr(sha1("${each.key}/${jsonencode(each.value)}"), 0, 8))'
        ),
    )
    policy.attr("region", E("local.identity.provider.region"))
    policy.attr("description", description("instance schedule"))
    isp = policy.block("instance_schedule_policy")
    isp.attr("time_zone", E("each.value.timeZone"))
    isp.block("vm_start_schedule").attr("schedule", E("each.value.start"))
    isp.block("vm_stop_schedule").attr("schedule", E("each.value.stop"))
    policy.block("lifecycle").attr("create_before_destroy", True)
    return [
        Comment(
            "Instance schedules run as the project's Compute Engine Service Agent, which must hold\n"
            "compute.instances.start and .stop (e.g. roles/compute.instanceAdmin.v1): granted once per project\n"
            "by its owner, not by this stack."
        ),
        policy,
    ]


def instance_policies() -> str:
    """A Fixed instance's `resource_policies`: its pool's schedule policy, if the pool has one."""
    return (
        "try(local.schedule_cron[each.value.pool], null) == null ? [] : "
        "[google_compute_resource_policy.schedule[each.value.pool].self_link]"
    )


def scaling_schedule(auto: Block) -> None:
    """The autoscaler's scaling schedule (the pool's min during its hours) and min 0 outside them."""
    dyn = auto.block("dynamic", "scaling_schedules")
    dyn.attr("for_each", E(f'try({{ "{SCALING_SCHEDULE}" = local.schedule_cron[each.key] }}, {{}})'))
    content = dyn.block("content")
    content.attr("name", E("scaling_schedules.key"))
    content.attr("schedule", E("scaling_schedules.value.start"))
    content.attr("time_zone", E("scaling_schedules.value.timeZone"))
    content.attr("duration_sec", E("scaling_schedules.value.durationSec"))
    content.attr("min_required_replicas", E("max(each.value.min, 1)"))
