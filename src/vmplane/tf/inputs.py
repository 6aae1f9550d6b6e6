"""The spec's values as Terraform locals, one file per impact class.

Every leaf of the spec goes to the inputs file of its impact class (envspec/impact.py), so a change to one
field changes exactly one inputs file and the file name says what applying it does:
`inputs.runtime.tf` (pushed to VMs), `inputs.vm.tf` (a new template version), `inputs.infra.tf` (cloud
resources in place, and the identity values that cannot change in place). `main.tf` reads them as
`local.runtime.…`, `local.vm.…`, `local.cloud.…` and `local.identity.…`, keeping the spec's own names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.envspec.impact import USER_KEYED, Impact, classify
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.percloud import secret_warnings
from vmplane.tf import vmconfig_files
from vmplane.tf.hcl import Block, Comment, Expr, Heredoc, Item

SKIP = {"$schema"}  # editor hint: no effect on any resource
KINDS: tuple[Literal["start"], Literal["stop"]] = ("start", "stop")
STYLES: tuple[Literal["unix"], Literal["eventbridge"]] = ("unix", "eventbridge")


SECRETS_NOTE = (
    '{ secret = "<ref>" } is a reference: the VMs read the value with their own identity, and neither\n'
    "these files nor Terraform's plan or state ever hold it."
)

# The stacks' grants are derived from the references in `local.runtime` (field path -> reference text),
# so a reference lives in one place: editing it in inputs.runtime.tf moves its grant with it.
SECRET_REFS = (
    "merge(\n"
    '    { for k, v in try(local.runtime.env, {}) : "runtime.env.${k}" => v.secret if can(v.secret) },\n'
    '    { for k, v in try(local.runtime.files, {}) : "runtime.files[\\"${k}\\"]" => v.secret if can(v.secret) },\n'
    "  )"
)


def store_names(store: str, tail: str) -> str:
    """HCL: the set of secret names one store's references name, the text after `store:` up to `tail`
    (a JSON key or a pinned version: a grant is on the secret, whichever key or version is read)."""
    return (
        "toset([\n"
        f'    for r in values(local.secret_refs) : split("{tail}", trimprefix(r, "{store}:"))[0]\n'
        f'    if startswith(r, "{store}:")\n'
        "  ])"
    )


@dataclass(frozen=True)
class InputNotes:
    """What applying a runtime or a VM input does: the file's header comment, in the stack's own terms
    (where runtime values are kept, what a new VM template is called and when VMs move onto it)."""

    runtime: str
    vm: str


AWS_NOTES = InputNotes(
    runtime=(
        "Runtime inputs: changing these pushes files and variables to the running VMs through the\n"
        "exec channel (vmplane), without replacing any VM. Kept in SSM Parameter Store by this stack.\n" + SECRETS_NOTE
    ),
    vm=(
        "VM inputs: changing these makes a new launch template version. Running VMs are not replaced\n"
        "by `terraform apply`; replace them one at a time (vmplane rotate, or -replace per instance)."
    ),
)


def split(spec_doc: dict[str, Any]) -> dict[Impact, dict[str, Any]]:
    """The spec document's leaves, nested as in the spec, grouped by impact class."""
    out: dict[Impact, dict[str, Any]] = {i: {} for i in Impact}

    def walk(node: dict[str, Any], path: list[str], pattern: str) -> None:
        for key in sorted(node):
            if not path and key in SKIP:
                continue
            value = node[key]
            sub = f"{pattern}.{'*' if pattern in USER_KEYED else key}" if pattern else key
            if isinstance(value, dict) and value:
                walk(value, [*path, key], sub)
                continue
            impact = classify(sub)
            if impact is None and value == {}:
                continue  # an object left empty (e.g. `exec` with its mode defaulted) holds no value
            if impact is None:
                raise KeyError(f"no impact class for {'.'.join([*path, key])}")
            target = out[impact]
            for part in path:
                target = target.setdefault(part, {})
            target[key] = value

    walk(spec_doc, [], "")
    return out


def input_files(spec: EnvSpec, spec_doc: dict[str, Any], notes: InputNotes = AWS_NOTES) -> dict[str, list[Item]]:
    groups = split(spec_doc)
    vm = dict(groups[Impact.vm])
    # The rendered user-data is a VM input too: it is what a pool's VMs boot with. Its manifest is read
    # from the copy beside the stack (`local.user_data`), so editing the copy changes the templates.
    vm["userData"] = {
        pool: Heredoc(render_user_data(spec, pool, manifest_content=vmconfig_files.PLACEHOLDER), "USERDATA")
        for pool in sorted(spec.pools)
    }
    vm["vmconfig"] = vmconfig_files.pool_inputs(spec)
    return {
        "inputs.runtime.tf": [
            Comment(notes.runtime),
            *plain_secret_comments(spec),
            Block("locals").attr("runtime", groups[Impact.runtime].get("runtime", {})),
        ],
        "inputs.vm.tf": [
            Comment(notes.vm),
            Block("locals").attr("vm", vm),
        ],
        "inputs.infra.tf": [
            Comment("Cloud inputs: changing these updates cloud resources in place."),
            Block("locals").attr("cloud", with_schedule_crons(spec, groups[Impact.cloud])),
            Comment(
                "Identity: NOT changeable in place. A change here means destroying the environment and\n"
                "creating it again; terraform would replace the network and everything in it."
            ),
            Block("locals").attr("identity", groups[Impact.identity]),
        ],
    }


def plain_secret_comments(spec: EnvSpec) -> list[Item]:
    """A comment over the runtime inputs for each plain value named like a secret (`validate` warns of the
    same): such a value is in these files and in Terraform's state, where a reference would not be."""
    warnings = secret_warnings(spec)
    if not warnings:
        return []
    return [
        Comment(
            "\n".join(["WARNING: plain text that looks like a secret (kept in clear here and in state):", *warnings])
        )
    ]


def with_schedule_crons(spec: EnvSpec, cloud: dict[str, Any]) -> dict[str, Any]:
    """The cloud inputs with each pool schedule's cron expressions beside its times (`cron.start.unix`,
    `cron.stop.eventbridge`, ...: the clouds' schedulers take cron, HCL cannot derive it from a day
    range). Derived from the schedule, so they change exactly when it does; absent without one."""
    scheduled = {name: p.schedule for name, p in spec.pools.items() if p.schedule is not None}
    if not scheduled:
        return cloud
    pools = {name: dict(values) for name, values in cloud.get("pools", {}).items()}
    for name, sched in scheduled.items():
        crons = {kind: {style: sched.cron(kind, style) for style in STYLES} for kind in KINDS}
        pools[name]["schedule"] = {**pools[name]["schedule"], "cron": crons}
    return {**cloud, "pools": pools}


def pool_locals(loc: Block) -> None:
    """The pool maps every stack derives from the inputs: one key per Fixed VM (`<env>-<pool>-<i>`, its
    stable name) and the auto-scaled pools with their sizes."""
    loc.attr(
        "fixed_vms",
        Expr(
            "merge([\n"
            "    for name, p in local.cloud.pools : {\n"
            '      for i in range(p.size) : "${local.identity.name}-${name}-${i}" => { pool = name, index = i }\n'
            '    } if local.identity.pools[name].mode == "fixed"\n'
            "  ]...)"
        ),
    )
    loc.attr(
        "asg_pools",
        Expr('{ for name, p in local.identity.pools : name => local.cloud.pools[name] if p.mode == "asg" }'),
    )
    vmconfig_files.add_locals(loc)
