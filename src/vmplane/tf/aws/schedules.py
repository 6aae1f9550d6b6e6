"""Pool schedules in the stack, as the direct pipeline makes them (clouds/aws/schedules.py): scheduled
actions on an ASG pool's group, EventBridge Scheduler schedules in the environment's group for a Fixed
pool, and the scheduler's start/stop-only role (roles.tf). The times are cloud inputs
(`local.cloud.pools.<pool>.schedule`, with the cron forms vmplane derives from them), so a changed
schedule changes inputs.infra.tf only and is applied in place. Nothing here is written without a
schedule, so a stack without one is unchanged."""

from __future__ import annotations

from vmplane.clouds.aws.scheduler_role import POLICY_NAME
from vmplane.envspec.models import EnvSpec
from vmplane.tf.aws.common import BASE, OWNER, E, tag_map
from vmplane.tf.hcl import Block, Comment, Item

KINDS = '["start", "stop"]'


def scheduled_modes(spec: EnvSpec) -> set[str]:
    """The pool modes that have a schedule ("fixed", "asg")."""
    return {p.mode for p in spec.pools.values() if p.schedule is not None}


def _keys(source: str, condition: str) -> E:
    """`{"<pool>-start" => {pool, kind}, ...}` for the pools of `source` that `condition` selects."""
    return E(
        "merge([\n"
        f"    for name, p in {source} : {{\n"
        f'      for kind in {KINDS} : "${{name}}-${{kind}}" => {{ pool = name, kind = kind }}\n'
        f"    }} if {condition}\n"
        "  ]...)"
    )


def schedules(spec: EnvSpec) -> list[Item]:
    modes = scheduled_modes(spec)
    if not modes:
        return []
    out: list[Item] = [Comment("---- schedules: the clouds' own schedulers stop and start the pools ----")]
    loc = Block("locals")
    if "asg" in modes:
        loc.attr("asg_schedules", _keys("local.asg_pools", "try(p.schedule, null) != null"))
    if "fixed" in modes:
        loc.attr("schedule_group", E(f'substr("{BASE}-schedules", 0, 64)'))
        fixed = 'local.identity.pools[name].mode == "fixed" && try(p.schedule, null) != null'
        loc.attr("fixed_schedules", _keys("local.cloud.pools", fixed))
    out.append(loc)
    sched = "local.cloud.pools[each.value.pool].schedule"
    if "asg" in modes:
        action = Block("resource", ["aws_autoscaling_schedule", "pool"])
        action.comment("At stop: min 0 / desired 0, max unchanged (-1); at start: the pool's sizes.")
        action.attr("for_each", E("local.asg_schedules"))
        action.attr(
            "scheduled_action_name", E('"${aws_autoscaling_group.pool[each.value.pool].name}-${each.value.kind}"')
        )
        action.attr("autoscaling_group_name", E("aws_autoscaling_group.pool[each.value.pool].name"))
        action.attr("recurrence", E(f"{sched}.cron[each.value.kind].unix"))
        action.attr("time_zone", E(f"{sched}.timezone"))
        start = 'each.value.kind == "start"'
        action.attr("min_size", E(f"{start} ? local.asg_pools[each.value.pool].min : 0"))
        action.attr("max_size", E(f"{start} ? local.asg_pools[each.value.pool].max : -1"))
        action.attr("desired_capacity", E(f"{start} ? local.asg_pools[each.value.pool].desired : 0"))
        out.append(action)
    if "fixed" in modes:
        out.append(
            Block("resource", ["aws_scheduler_schedule_group", "this"])
            .attr("name", E("local.schedule_group"))
            .attr("tags", tag_map("schedule-group", "local.schedule_group"))
        )
        s = Block("resource", ["aws_scheduler_schedule", "pool"])
        s.attr("for_each", E("local.fixed_schedules"))
        s.attr("name", E('substr("${local.identity.name}-${each.key}", 0, 64)'))
        s.attr("group_name", E("aws_scheduler_schedule_group.this.name"))
        s.attr("description", E(f'"vmplane {OWNER}: ${{each.value.kind}} pool ${{each.value.pool}}"'))
        s.attr("schedule_expression", E(f"{sched}.cron[each.value.kind].eventbridge"))
        s.attr("schedule_expression_timezone", E(f"{sched}.timezone"))
        s.block("flexible_time_window").attr("mode", "OFF")
        target = s.block("target")
        target.comment("The universal target: EC2 StartInstances / StopInstances on exactly the pool's VMs.")
        target.attr(
            "arn",
            E('"arn:${data.aws_partition.current.partition}:scheduler:::aws-sdk:ec2:${each.value.kind}Instances"'),
        )
        target.attr("role_arn", E("aws_iam_role.scheduler.arn"))
        target.attr(
            "input",
            E(
                "jsonencode({\n"
                "    InstanceIds = sort([\n"
                "      for k, vm in aws_instance.vm : vm.id if local.fixed_vms[k].pool == each.value.pool\n"
                "    ])\n"
                "  })"
            ),
        )
        retry = target.block("retry_policy")
        retry.comment("A start or stop that cannot run within the hour is dropped rather than run hours late.")
        retry.attr("maximum_event_age_in_seconds", 3600).attr("maximum_retry_attempts", 20)
        out.append(s)
    return out


def scheduler_role(spec: EnvSpec) -> list[Item]:
    """roles.tf: the role EventBridge Scheduler runs the Fixed pools' schedules as."""
    if "fixed" not in scheduled_modes(spec):
        return []
    name = f'substr("{BASE}-scheduler", 0, 64)'
    account = "data.aws_caller_identity.current.account_id"
    part = "data.aws_partition.current.partition"
    region = "local.identity.provider.region"
    source = f"arn:${{{part}}}:scheduler:${{{region}}}:${{{account}}}:schedule/${{local.schedule_group}}/*"
    assume = (
        "jsonencode({\n"
        '    Version = "2012-10-17"\n'
        "    Statement = [{\n"
        '      Effect    = "Allow"\n'
        '      Principal = { Service = "scheduler.amazonaws.com" }\n'
        '      Action    = "sts:AssumeRole"\n'
        "      Condition = {\n"
        f'        StringEquals = {{ "aws:SourceAccount" = {account} }}\n'
        f'        ArnLike      = {{ "aws:SourceArn" = "{source}" }}\n'
        "      }\n"
        "    }]\n"
        "  })"
    )
    allow = (
        "jsonencode({\n"
        '    Version = "2012-10-17"\n'
        "    Statement = [{\n"
        '      Sid      = "StartStopThisJobsInstances"\n'
        '      Effect   = "Allow"\n'
        '      Action   = ["ec2:StartInstances", "ec2:StopInstances"]\n'
        f'      Resource = "arn:${{{part}}}:ec2:${{{region}}}:${{{account}}}:instance/*"\n'
        "      Condition = {\n"
        '        StringEquals = { ("aws:ResourceTag/${local.prefix}jobId") = local.stack_id }\n'
        "      }\n"
        "    }]\n"
        "  })"
    )
    return [
        Comment(
            "EventBridge Scheduler's role: ec2:StartInstances/StopInstances on this environment's VMs only,\n"
            "assumed only for this account's schedules in the environment's schedule group."
        ),
        Block("data", ["aws_caller_identity", "current"]),
        Block("data", ["aws_partition", "current"]),
        Block("resource", ["aws_iam_role", "scheduler"])
        .attr("name", E(name))
        .attr("assume_role_policy", E(assume))
        .attr("tags", tag_map("iam-role", name)),
        Block("resource", ["aws_iam_role_policy", "scheduler"])
        .attr("name", POLICY_NAME)
        .attr("role", E("aws_iam_role.scheduler.id"))
        .attr("policy", E(allow)),
    ]
