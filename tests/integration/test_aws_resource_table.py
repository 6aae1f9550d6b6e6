"""The AWS resource table against the three places that name resources, for every AWS example: the plan's
"+" addresses, what the sandbox holds after apply (read through `TABLE.observe`), and the resource types
of the generated stack (`vmplane tf generate`'s structure). Each known disagreement is in an allow-list
below with the reason; anything else that disagrees fails here, naming it."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.clouds.aws.resources import TABLE
from vmplane.clouds.base import Context, Tagger
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.tf.hcl import Block
from vmplane.tf.stacks import STACKS

EXAMPLES = ["fixed.jsonc", "web.jsonc", "dev-schedule.jsonc"]
ASG_MEMBER_TAG = "aws:autoscaling:groupName"


def observed_only(spec: EnvSpec) -> set[str]:
    """In the sandbox after apply, not a "+" line of the plan: what AWS makes with the VPC (vmplane tags
    them and empties the default group, but does not create them) and the certificate's DNS validation
    record (its name is ACM's, known only once the certificate is requested)."""
    return {f"aws_security_group.{spec.name}-default", f"aws_route_table.{spec.name}-default"}


def stack_types(spec: EnvSpec) -> set[str]:
    structure = STACKS[spec.provider.cloud].structure(spec)
    return {i.labels[0] for items in structure.values() for i in items if isinstance(i, Block) and i.type == "resource"}


# Types the plan lists that the stack has no resource of, and the reverse (beyond the table's
# `direct=False` kinds, which only the stack makes).
PLAN_NOT_STACK: set[str] = set()
STACK_NOT_PLAN: set[str] = set()


def observe(cli: Cli, env: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[str]]:
    """What the table observes of the applied job, and the zones its record holds."""
    from vmplane.clouds.registry import driver_for
    from vmplane.jobs.listings import find_job
    from vmplane.settings import Settings

    for k, v in cli.env.items():
        if k.startswith("VMPLANE_"):
            monkeypatch.setenv(k, v)
    job = find_job(Settings(home=cli.home), env)
    ctx = Context(job_id=job.id, spec=job.spec, infra=job.infra, tagger=Tagger.for_spec(job.spec, job.id))
    driver: Any = driver_for(job.target)
    return TABLE.observe(driver.aws, ctx), list(job.infra.Zones)


def test_each_kind_has_its_own_terraform_type_and_a_note_where_it_is_made_on_one_side_only() -> None:
    types = [k.tf_type for k in TABLE.kinds]
    assert len(types) == len(set(types)), sorted(types)
    one_sided = [k.kind for k in TABLE.kinds if (not k.direct or not k.in_stack) and not k.note]
    assert one_sided == []


@pytest.mark.sandbox
@pytest.mark.parametrize("example", EXAMPLES)
def test_plan_sandbox_and_stack_agree_with_the_table(
    cli: Cli, sandbox: Sandbox, tmp_path, example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"rt-{example.split('.')[0]}"
    env_file = write_env(tmp_path, name, example=example)
    spec = load_spec(env_file)
    planned = cli.json("plan", "-f", str(env_file), "--sandbox")["resources"]
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    try:
        # A clean apply has no drift (nothing the table observes is unexpected, nothing expected is missing).
        assert cli.json("drift", name)["drift"] == []
        found, zones = observe(cli, name, monkeypatch)
    finally:
        done = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert done["status"] == "deleted", done["error"]

    # The plan names subnets by zone before stepValidate picks them: the applied record's zones.
    plus = {f"{r['type']}.{r['name']}" for r in planned if r["action"] == "+"}
    for i, zone in enumerate(zones):
        plus = {a.replace(f"<zone {i + 1}>", zone) for a in plus}
    kinds = {k.tf_type: k for k in TABLE.kinds}
    plan_types = {a.split(".", 1)[0] for a in plus}
    assert plan_types <= TABLE.direct_types(), plan_types - TABLE.direct_types()
    observable = {a for a in plus if kinds[a.split(".", 1)[0]].observe is not None}

    # A scaling group's members carry the job's tags, but the group is the plan's line for them.
    held = {
        TABLE.kind(o.kind).address(o.name or o.id)
        for o in found
        if TABLE.kind(o.kind).direct and not (o.kind == "instance" and ASG_MEMBER_TAG in o.tags)
    }
    validation = {a for a in held if a.startswith("aws_route53_record._")}
    assert held - observable - validation == observed_only(spec), sorted(held - observable)
    assert bool(validation) == (spec.load_balancer is not None)
    assert observable - held == set(), sorted(observable - held)
    assert {o.kind for o in found} <= set(TABLE.observed_kinds())

    stack = stack_types(spec)
    assert stack <= TABLE.stack_types(), stack - TABLE.stack_types()
    in_stack = {t for t in plan_types if kinds[t].in_stack}
    assert in_stack - stack == PLAN_NOT_STACK, sorted(in_stack - stack)
    direct = {t for t in stack if kinds[t].direct}
    assert direct - plan_types == STACK_NOT_PLAN, sorted(direct - plan_types)
