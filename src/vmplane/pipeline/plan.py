"""Plans as data: the ordered steps of a job and the resources each creates or destroys.

The same Plan object drives `vmplane plan`, the confirmation before `apply`/`destroy`, and
`--output json`. Resource types use Terraform's names so the direct pipeline and the generated
OpenTofu stack can be compared line for line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from graphlib import CycleError, TopologicalSorter
from typing import Any

from vmplane.clouds.base import Action, CloudDriver, PlannedResource
from vmplane.clouds.drift import Drift, DriftChange
from vmplane.clouds.steps import StepList, step_of
from vmplane.cost.delta import plan_cost
from vmplane.envspec.models import EnvSpec
from vmplane.errors import VmplaneError
from vmplane.pipeline.steps import BY_NAME, KNOWN_STEPS, LB_STEPS, OPERATION_STEPS, PROVISION_STEPS, TEARDOWN_STEPS
from vmplane.state import InfraConfig

__all__ = ["Action", "PlannedResource"]  # re-exported: plans are made of them

__all__ += ["KNOWN_STEPS", "LB_STEPS", "OPERATION_STEPS", "PROVISION_STEPS", "TEARDOWN_STEPS"]  # from the table


def step_graph(names: list[str], depends: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """What each of `names` needs before it starts: steps or `step:milestone`s (`clouds.steps`), in order.

    `depends` is the driver's (`pipeline.steps.step_dependencies`). A dependency outside `names` (already
    done, e.g. the network when an operation attaches an LB) counts as met; a step `depends` does not
    list (operations) follows the step before it; a step declared `after_all` needs every step before it,
    and every step after a `barrier` needs it. A cycle is an error, and so is a dependency listed after
    its dependent: the list is the order the user is shown.
    """
    unknown = sorted(set(names) - KNOWN_STEPS - set(depends))
    if unknown:
        raise PlanError(f"unknown step(s): {', '.join(unknown)}")
    order = {name: i for i, name in enumerate(names)}
    graph: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        if name in BY_NAME and BY_NAME[name].after_all:
            graph[name] = names[:i]
        elif name in depends:
            graph[name] = [d for d in depends[name] if step_of(d) in order]
        else:
            graph[name] = names[i - 1 : i]
        barriers = [b for b in names[:i] if b in BY_NAME and BY_NAME[b].barrier and b not in graph[name]]
        graph[name] = [*graph[name], *barriers]
    sorter = _sorter(graph)
    try:
        sorter.prepare()
    except CycleError as err:
        raise PlanError(f"the steps depend on each other in a cycle: {' -> '.join(err.args[1])}") from None
    for name, deps in graph.items():
        late = [step_of(d) for d in deps if order[step_of(d)] > order[name]]
        if late:
            raise PlanError(f"{name} needs {', '.join(late)}, which the plan lists after it")
    return graph


def _sorter(graph: Mapping[str, list[str]]) -> TopologicalSorter[str]:
    """Steps ordered by the steps they need (a milestone orders like its whole step)."""
    return TopologicalSorter({name: [step_of(d) for d in deps] for name, deps in graph.items()})


def waves(names: list[str], depends: Mapping[str, list[str]]) -> list[list[str]]:
    """The steps in waves, each step in the first wave after all of its dependencies have ended (a
    milestone counted as its whole step): the order of completion, as bench/ reports it. The runner
    itself starts each step as soon as what it needs is met (`pipeline.stepgraph`)."""
    graph = step_graph(names, depends)
    order = {name: i for i, name in enumerate(names)}
    sorter = _sorter(graph)
    sorter.prepare()
    out: list[list[str]] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=order.__getitem__)
        out.append(ready)
        sorter.done(*ready)
    return out


def provision_steps(spec: EnvSpec) -> list[str]:
    """The provisioning steps in the table's order; the load balancer's only when the spec has one."""
    wanted = {StepList.provision} | ({StepList.lb} if spec.load_balancer is not None else set())
    return [s.name for s in BY_NAME.values() if s.list in wanted]


ACTION_WORDS = {
    Action.create: "create",
    Action.update: "update in place",
    Action.destroy: "destroy",
    Action.recreate: "destroy and then create replacement",
}


class PlanKind(StrEnum):
    provision = "provision"
    teardown = "teardown"
    update = "update"
    none = "none"
    attach_lb = "attach_lb"
    detach_lb = "detach_lb"
    scale = "scale"
    rotate = "rotate"
    stop = "stop"
    start = "start"
    repair = "repair"
    push = "push"


class PlanError(VmplaneError):
    """The steps cannot be ordered (a cycle, an unknown step): a bug in a driver or a plan, not in the file."""


@dataclass
class Plan:
    kind: PlanKind
    env: str
    target: str
    steps: list[str]
    resources: list[PlannedResource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headline: str | None = None  # what the plan does in words (an update's impact classes, a scale's sizes)
    cost: dict[str, Any] | None = None  # cost.delta.plan_cost: the estimate, and before/after for a change
    # Changes made in place that are not resource lines (an update's changed fields, each shown as `~ path:
    # old -> new`; the sizes a scale sets): counted as changes, next to the VMs a size change adds or destroys.
    changed_fields: int = 0
    # What the cloud's refresh found changed outside vmplane (`clouds.drift`), repaired by stepRepairDrift;
    # shown as their own lines and counted with the resources.
    repairs: list[Drift] = field(default_factory=list)

    def count(self, *actions: Action) -> int:
        return sum(1 for r in self.resources if r.action in actions)

    def counts(self) -> dict[str, int]:
        """What the summary counts: a replacement adds one and destroys one; a repair of something missing
        adds it, of something changed changes it, of an extra destroys it (reported-only drift is not counted)."""
        fixes = Counter(d.change for d in self.repairs if d.repairable)
        return {
            "add": self.count(Action.create, Action.recreate) + fixes[DriftChange.missing],
            "change": self.count(Action.update) + self.changed_fields + fixes[DriftChange.changed],
            "destroy": self.count(Action.destroy, Action.recreate) + fixes[DriftChange.extra],
        }

    @property
    def summary(self) -> str:
        if self.headline and not self.resources and not self.changed_fields and not self.repairs:
            return self.headline
        if not self.resources and not self.changed_fields and not self.repairs:
            return "No changes."
        n = self.counts()
        counted = f"Plan: {n['add']} to add, {n['change']} to change, {n['destroy']} to destroy."
        return f"{self.headline} {counted}" if self.headline else counted

    def legend(self) -> list[str]:
        present = [a for a in Action if any(r.action is a for r in self.resources)]
        return [f"  {a.value} {ACTION_WORDS[a]}" for a in present]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "env": self.env,
            "target": self.target,
            "steps": self.steps,
            "resources": [
                {"action": r.action.value, "type": r.type, "name": r.name, "step": r.step, "detail": r.detail}
                for r in self.resources
            ],
            "repairs": [d.to_json() for d in self.repairs],
            "notes": self.notes,
            "summary": self.summary,
            "counts": self.counts(),
            "cost": self.cost,
        }


def provision_plan(driver: CloudDriver, spec: EnvSpec, infra: InfraConfig, target: str) -> Plan:
    """What applying `spec` to nothing creates, named by the driver as its steps name them."""
    notes = []
    if spec.network.existing_vpc_id:
        notes.append(f"existing network {spec.network.existing_vpc_id} is used as is and never modified or deleted")
    resources = driver.provision_resources(spec, infra)
    plan = Plan(PlanKind.provision, spec.name, target, provision_steps(spec), resources, notes)
    plan.cost = plan_cost(None, spec)
    return plan


def teardown_plan(driver: CloudDriver, spec: EnvSpec, infra: InfraConfig, target: str) -> Plan:
    """What destroying a recorded environment deletes, in teardown order."""
    notes = []
    if infra.NetworkID and not infra.NetworkCreated:
        notes.append(f"existing network {infra.NetworkID} is not vmplane's and stays untouched")
    notes.append("anything else tagged with this job id is found by tag and deleted too")
    resources = driver.teardown_resources(infra)
    plan = Plan(PlanKind.teardown, spec.name, target, list(TEARDOWN_STEPS), resources, notes)
    plan.cost = plan_cost(spec, None)
    return plan
