"""Every pipeline step, declared once: its name, the job list it is in, what it needs, what it runs.

The runner dispatches from this table, the plan's step lists derive from it, and one mechanism orders it:
`needs` (steps and `step:milestone`s, `clouds.steps`), turned into a graph by `plan.step_graph` and run by
`stepgraph`. A driver changes a declaration or adds its own through `CloudDriver.steps`. The seed's names
and their completion order are what job records, the API and the tests show.
"""

from __future__ import annotations

from collections.abc import Mapping

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.clouds.steps import PUBLIC_NETWORK, VMS_RUNNING, Step, StepList, milestone
from vmplane.pipeline import step_work as w

P, LB, T, OP = StepList.provision, StepList.lb, StepList.teardown, StepList.operation
NET_PUBLIC = milestone("stepCreateNetwork", PUBLIC_NETWORK)

# In the order the user is shown. Provisioning, on a cloud where nothing waits on anything not listed: IAM
# does not wait for the network, the LB is built while the launch template and the VMs are, the DNS record
# while the VMs boot. A driver whose steps announce no milestone gets "after the whole step" from the same.
TABLE: tuple[Step, ...] = (
    Step("stepValidate", P, w.validate, needs=()),
    Step("stepCreateNetwork", P, w.network, needs=("stepValidate",)),
    Step("stepCreateIAM", P, lambda d, c, j: create_identity(d, c), needs=("stepValidate",)),
    Step(
        "stepCreateLaunchTemplate", P, lambda d, c, j: d.pools.ensure_templates(c), needs=(NET_PUBLIC, "stepCreateIAM")
    ),
    # The VMs' bootstrap needs egress at first boot: the whole network, the NAT route included.
    Step("stepCreateVMs", P, w.create_vms, needs=("stepCreateLaunchTemplate", "stepCreateNetwork")),
    # IAM too: a provision requests the certificate there (`LoadBalancer.prepare`), and this step must see it.
    Step("stepCreateLoadBalancer", LB, lambda d, c, j: w.lb(d).ensure_frontend(c), needs=(NET_PUBLIC, "stepCreateIAM")),
    # Registers the VMs, which need to exist and run, not to have finished their bootstrap.
    Step(
        "stepCreateTargetGroup",
        LB,
        lambda d, c, j: w.lb(d).ensure_backend(c),
        needs=("stepCreateLoadBalancer", milestone("stepCreateVMs", VMS_RUNNING)),
    ),
    Step("stepCreateListener", LB, lambda d, c, j: w.lb(d).ensure_listener(c), needs=("stepCreateTargetGroup",)),
    Step("stepCreateDNSRecord", LB, lambda d, c, j: w.lb(d).ensure_dns_record(c), needs=("stepCreateLoadBalancer",)),
    Step("stepRegisterSpace", P, w.register, after_all=True),  # reads what every step before it recorded
    Step("stepFinalize", P, w.finalize),
    # Teardown: the LB first (it references the VMs' groups), then the VMs; what the VMs used goes side by
    # side once they are gone; the network last.
    Step("stepDetachLoadBalancer", T, w.detach_lb, needs=()),
    Step("stepTerminateVMs", T, w.terminate_vms, needs=("stepDetachLoadBalancer",)),
    Step("stepDeleteLaunchTemplate", T, lambda d, c, j: d.pools.delete_templates(c), needs=("stepTerminateVMs",)),
    Step(
        "stepDeleteSecurityGroup",
        T,
        lambda d, c, j: d.network.delete_firewall(c),
        needs=("stepTerminateVMs", "stepDetachLoadBalancer"),
    ),
    Step("stepDeleteIAM", T, lambda d, c, j: delete_identity(d, c), needs=("stepTerminateVMs",)),
    Step(
        "stepDeleteNetwork",
        T,
        lambda d, c, j: d.network.delete(c),
        needs=("stepDeleteLaunchTemplate", "stepDeleteSecurityGroup", "stepDeleteIAM"),
    ),
    Step("stepUnregisterSpace", T, w.unregister),
    # Operations (vmOp) on a provisioned job: each after the step before it in the job's list.
    Step("stepScalePool", OP, w.scale),
    Step("stepUpdateTags", OP, lambda d, c, j: d.inventory.retag(c), after_all=True),
    Step("stepRotateVMs", OP, w.rotate),
    Step("stepPushRuntime", OP, w.push),
    Step("stepStopPools", OP, lambda d, c, j: w.stop_start(d, c, j, stop=True)),
    Step("stepStartPools", OP, lambda d, c, j: w.stop_start(d, c, j, stop=False)),
    # The repair changes the record the steps after it reconcile from.
    Step("stepRepairDrift", OP, lambda d, c, j: d.inventory.repair_drift(c), barrier=True),
)
BY_NAME: Mapping[str, Step] = {s.name: s for s in TABLE}


def _names(*lists: StepList) -> list[str]:
    return [s.name for s in TABLE if s.list in lists]


PROVISION_STEPS = _names(P)  # 7 steps
LB_STEPS = _names(LB)  # 11 with a load balancer, after stepCreateVMs
TEARDOWN_STEPS = _names(T)
OPERATION_STEPS = _names(OP)
KNOWN_STEPS = frozenset(BY_NAME)


def needs_of(table: tuple[Step, ...] | list[Step]) -> dict[str, list[str]]:
    """The declared needs of the steps that declare them (the rest follow their list: `plan.step_graph`)."""
    return {s.name: list(s.needs) for s in table if s.needs is not None}


DEFAULT_DEPENDS = needs_of(TABLE)


def table_for(driver: CloudDriver | None) -> dict[str, Step]:
    """The table as `driver` runs it (its changes and its own steps); the plain table for no driver."""
    return {s.name: s for s in (driver.steps(TABLE) if driver is not None else TABLE)}


def step_dependencies(driver: CloudDriver) -> dict[str, list[str]]:
    """What each step needs before it starts, as `driver` runs them."""
    return needs_of(list(table_for(driver).values()))


def early_steps(driver: CloudDriver) -> frozenset[str]:
    """Steps that start at once and call `ctx.wait_inputs()` themselves (their first part needs nothing)."""
    return frozenset(s.name for s in table_for(driver).values() if s.early)
