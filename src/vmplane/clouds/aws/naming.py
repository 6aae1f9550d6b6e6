"""Every name the AWS driver gives a resource, in one place: the steps create with these and the plan
shows these, so what `vmplane plan` lists is what `apply` makes."""

from __future__ import annotations

from vmplane.clouds.naming import digest, fit
from vmplane.envspec.models import EnvSpec

# EC2 tag values are at most 256 characters; an instance's name also heads its volume's and interface's
# Name tags (`<name>-root`, `<name>-eni`), so it leaves room for those suffixes.
NAME_TAG_LIMIT = 256
INSTANCE_NAME_LIMIT = NAME_TAG_LIMIT - len("-root")


def partition(region: str) -> str:
    """The ARN partition a region belongs to."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def account_unique(spec: EnvSpec, suffix: str) -> str:
    """Security groups, launch templates and ASGs: org + env keeps two orgs' "web" envs apart."""
    return f"vmplane-{spec.org}-{spec.name}-{suffix}"


def vm_role_name(org: str, env: str) -> str:
    """IAM names are account-global (and at most 64 characters)."""
    return f"vmplane-{org}-{env}-vm"[:64]


def role_name(spec: EnvSpec) -> str:
    return vm_role_name(spec.org, spec.name)


def vpc_name(spec: EnvSpec) -> str:
    return spec.name


def igw_name(spec: EnvSpec) -> str:
    return f"{spec.name}-igw"


def subnet_name(spec: EnvSpec, role: str, zone: str) -> str:
    """`role` is `subnet-public` or `subnet-private` (the resources' zop:role tag)."""
    return f"{spec.name}-{role.removeprefix('subnet-')}-{zone}"


def nat_name(spec: EnvSpec) -> str:
    return f"{spec.name}-nat"


def route_table_name(spec: EnvSpec, role: str) -> str:
    return f"{spec.name}-{role}"


def vm_group_name(spec: EnvSpec) -> str:
    return account_unique(spec, "vm")


def lb_group_name(spec: EnvSpec) -> str:
    return account_unique(spec, "lb")


def launch_template_name(spec: EnvSpec, pool: str) -> str:
    return account_unique(spec, pool)


def asg_name(spec: EnvSpec, pool: str) -> str:
    return account_unique(spec, pool)


def instance_name(spec: EnvSpec, pool: str, index: int) -> str:
    """A Fixed pool's VM: its Name tag (and record name). Its launch token is fitted to RunInstances'
    64 characters on its own (tokens.py); a spec's names are far shorter than the tag's limit."""
    return fit(f"{spec.name}-{pool}-{index}", INSTANCE_NAME_LIMIT)


def asg_instance_name(spec: EnvSpec, pool: str) -> str:
    """The Name tag an ASG propagates to its instances."""
    return f"{spec.name}-{pool}"


def lb_base_name(spec: EnvSpec) -> str:
    """ALB and target group names: at most 32 chars, unique per org/env, stable across jobs."""
    return f"{spec.name[:19].rstrip('-')}-{digest(f'{spec.org}/{spec.name}')}"


def target_group_name(spec: EnvSpec) -> str:
    return f"{lb_base_name(spec)}-tg"


def scheduled_action_name(spec: EnvSpec, pool: str, kind: str) -> str:
    """An ASG pool's scheduled action (`kind` start|stop). AWS scopes these names per group, but the
    sandbox keeps one namespace per region, so they carry the group's account-unique name."""
    return f"{asg_name(spec, pool)}-{kind}"


def schedule_group_name(spec: EnvSpec) -> str:
    """The environment's EventBridge Scheduler group (names are per account and region, at most 64)."""
    return fit(account_unique(spec, "schedules"), 64)


def schedule_name(spec: EnvSpec, pool: str, kind: str) -> str:
    """A Fixed pool's EventBridge schedule (`kind` start|stop), inside the environment's group."""
    return fit(f"{spec.name}-{pool}-{kind}", 64)


def scheduler_role_name(spec: EnvSpec) -> str:
    """The role EventBridge Scheduler assumes to start and stop the Fixed pools' instances."""
    return fit(account_unique(spec, "scheduler"), 64)
