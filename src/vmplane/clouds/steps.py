"""A pipeline step's declaration, and the milestones steps announce.

Every step is declared once (`pipeline.steps.TABLE`): its name, the job list it belongs to, what it needs,
what it runs. A dependency is a step name, or `step:milestone`: a milestone is a point inside a step after
which what its dependents read is saved (`Context.reached`), so they may start before it ends. Whatever
starts early, a step records success only after every step it needs has ended, so steps still complete in
the order the dependencies give (the listener after the target group, the network before the VMs).
A driver changes a declaration, or adds one, through `CloudDriver.steps`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

# stepCreateNetwork: the VPC, its public subnets and an attached internet gateway exist (what an
# internet-facing load balancer and a launch template need); the private side may still be pending.
PUBLIC_NETWORK = "public"
# stepCreateVMs: every pool's VMs (or scaling groups) exist and run; their bootstrap may still be going.
VMS_RUNNING = "running"


def step_of(dependency: str) -> str:
    """The step a dependency (`step` or `step:milestone`) belongs to."""
    return dependency.split(":", 1)[0]


def milestone(step: str, name: str) -> str:
    return f"{step}:{name}"


class StepList(StrEnum):
    """The job list a step belongs to (what `vmplane plan` shows, in the table's order)."""

    provision = "provision"
    lb = "lb"  # provisioning with a load balancer: after stepCreateVMs; also `vmplane lb attach`
    teardown = "teardown"
    operation = "operation"


# (driver, ctx, job) -> None: the driver is a `CloudDriver`, the job a `store.job_records.JobView`.
StepRun = Callable[[Any, Any, Any], None]


@dataclass(frozen=True)
class Step:
    """One step, declared once. Ordering is `needs` alone (`pipeline.plan.step_graph`): `after_all` and
    `barrier` are the two needs a list position gives (every step before it; every step after it needs it)."""

    name: str
    list: StepList
    run: StepRun
    # Steps or `step:milestone`s; None: the step listed before it (an operation's steps run in list order).
    needs: tuple[str, ...] | None = None
    after_all: bool = False  # needs every step listed before it: it reads what they all recorded
    barrier: bool = False  # every step listed after it needs it: it changes the record they reconcile from
    # Starts at once and calls `ctx.wait_inputs()` before it touches what its needs produce.
    early: bool = False

    def but(self, **changes: Any) -> Step:
        return replace(self, **changes)


def changed(table: list[Step], name: str, **changes: Any) -> list[Step]:
    """`table` with step `name`'s declaration changed (what a driver's `steps` returns)."""
    if name not in {s.name for s in table}:
        raise KeyError(f"no step {name} to change")
    return [s.but(**changes) if s.name == name else s for s in table]
