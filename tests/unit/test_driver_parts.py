"""clouds/interfaces and pipeline/steps: a driver is its parts, a missing part is the capability, and every
step is declared once (the lists, the needs and the dispatch all come from one table)."""

from __future__ import annotations

import pytest

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.registry import FACTORIES, driver_for
from vmplane.clouds.steps import StepList, changed
from vmplane.envspec.models import Cloud
from vmplane.pipeline import runner
from vmplane.pipeline.plan import PlanError, step_graph
from vmplane.pipeline.steps import (
    BY_NAME,
    LB_STEPS,
    OPERATION_STEPS,
    PROVISION_STEPS,
    TABLE,
    TEARDOWN_STEPS,
    early_steps,
    step_dependencies,
)
from vmplane.target import Target

from .support import make_ctx


def drivers() -> list[CloudDriver]:
    return [driver_for(Target(cloud=cloud, region="somewhere")) for cloud in sorted(FACTORIES)]


@pytest.mark.parametrize("driver", drivers(), ids=lambda d: d.cloud.value)
def test_a_missing_part_is_the_capability(driver: CloudDriver) -> None:
    # `vmplane validate` reads the capabilities without the SDK; the pipeline reads the parts: they agree.
    caps = driver.capabilities
    assert (driver.lb is not None) == caps.load_balancers
    assert (driver.scheduler is not None) == caps.schedules
    assert driver.network and driver.pools and driver.exec_channel and driver.inventory


def test_proxmox_has_no_identity_lb_or_scheduler_and_its_steps_still_run(spec) -> None:
    pve = driver_for(Target(cloud=Cloud.proxmox, region="pve1"))
    assert pve.identity is None and pve.lb is None and pve.scheduler is None
    log: list[str] = []
    ctx = make_ctx(spec)
    ctx.log = log.append
    runner.STEPS["stepCreateIAM"](pve, ctx, None)
    runner.STEPS["stepDeleteIAM"](pve, ctx, None)
    assert log == [
        "no instance identity on Proxmox VE: exec is gated by the API token's PVE permissions",
        "no instance identity on Proxmox VE: nothing to delete",
    ]
    with pytest.raises(UnsupportedError, match="load balancers: not supported by the proxmox driver"):
        runner.STEPS["stepCreateTargetGroup"](pve, ctx, None)


def test_every_step_is_declared_once_and_the_lists_come_from_the_table() -> None:
    names = [s.name for s in TABLE]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert set(runner.STEPS) == set(names)  # the runner dispatches from the same declarations
    assert len(PROVISION_STEPS) == 7 and len(PROVISION_STEPS) + len(LB_STEPS) == 11
    for listed, kind in ((PROVISION_STEPS, StepList.provision), (TEARDOWN_STEPS, StepList.teardown)):
        assert listed == [s.name for s in TABLE if s.list is kind]
    assert OPERATION_STEPS[-1] == "stepRepairDrift" and BY_NAME["stepRepairDrift"].barrier


def test_drivers_change_their_steps_through_the_same_declarations() -> None:
    by_cloud = {d.cloud: d for d in drivers()}
    assert early_steps(by_cloud[Cloud.aws]) == {"stepDeleteNetwork"}
    assert early_steps(by_cloud[Cloud.gcp]) == frozenset()
    gcp = step_dependencies(by_cloud[Cloud.gcp])
    assert gcp["stepCreateDNSRecord"] == ["stepCreateLoadBalancer", "stepCreateListener"]
    assert step_dependencies(by_cloud[Cloud.proxmox])["stepCreateDNSRecord"] == ["stepCreateLoadBalancer"]
    with pytest.raises(KeyError, match="stepNoSuch"):
        changed(list(TABLE), "stepNoSuch", early=True)


def test_a_need_listed_after_its_step_is_refused() -> None:
    table = changed(list(TABLE), "stepCreateNetwork", needs=("stepCreateIAM",))
    needs = {s.name: list(s.needs) for s in table if s.needs is not None}
    with pytest.raises(PlanError, match="stepCreateNetwork needs stepCreateIAM"):
        step_graph(PROVISION_STEPS, needs)


def test_a_drivers_own_step_runs_from_its_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    aws = driver_for(Target(cloud=Cloud.aws, region="somewhere"))
    ran: list[str] = []
    mine = BY_NAME["stepFinalize"].but(
        name="stepWarmCaches", needs=("stepFinalize",), run=lambda d, c, j: ran.append("warm")
    )
    monkeypatch.setattr(type(aws), "steps", lambda self, table: [*table, mine])
    runner._run_of(aws, "stepWarmCaches")(aws, None, None)
    assert ran == ["warm"] and runner._run_of(aws, "stepFinalize") is runner.STEPS["stepFinalize"]
    assert step_graph([*PROVISION_STEPS, "stepWarmCaches"], step_dependencies(aws))["stepWarmCaches"] == [
        "stepFinalize"
    ]
