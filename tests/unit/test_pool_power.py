"""Whether a pool runs now, as rotate, exec and `status` ask it: stopped by `vmplane stop` (recorded),
or outside its schedule's hours (read from the schedule, since the cloud's scheduler runs it), and the
stop/start plans."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vmplane.envspec.load import load_spec
from vmplane.jobs import powerops
from vmplane.jobs.poolstate import pool_states, stopped_reason
from vmplane.jobs.vmops import OperationError, plan_rotate
from vmplane.state import InfraConfig, VMRecord, VMState
from vmplane.store.job_records import JobStatus, JobView, StepRecord

EXAMPLE = Path(__file__).parents[2] / "examples" / "fixed.jsonc"
SCHEDULE = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "20:00"}
TUESDAY_NOON = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
SATURDAY = datetime(2026, 12, 5, 11, 0, tzinfo=UTC)


def _job(schedule: dict[str, Any] | None = None, infra: InfraConfig | None = None) -> JobView:
    spec = load_spec(EXAMPLE).model_dump(mode="json", by_alias=True, exclude_none=True)
    if schedule:
        spec["pools"]["web"]["schedule"] = schedule
    vms = [VMRecord(Name=f"demo-fixed-web-{i}", Pool="web", Index=i, ID=f"i-{i}", State=VMState.ready) for i in (1, 2)]
    now = datetime.now(UTC)
    return JobView.model_validate(
        {
            "id": "job-1",
            "org": "acme",
            "env": "demo-fixed",
            "status": JobStatus.succeeded,
            "version": 1,
            "steps": [StepRecord(name="stepValidate")],
            "teardownSteps": [],
            "config": {
                "spec": spec,
                "infra": (infra or InfraConfig(VMs=vms, LaunchTemplateVersion={"web": 1})).model_dump(mode="json"),
                "target": {"cloud": "aws", "region": "us-east-1"},
            },
            "error": None,
            "createdAt": now,
            "updatedAt": now,
        }
    )


def test_a_pool_without_schedule_or_stop_runs() -> None:
    job = _job()
    assert stopped_reason(job, "web") is None
    assert pool_states(job)["web"] == {"state": "running", "reason": None, "schedule": None, "nextChange": None}


def test_a_scheduled_pool_is_stopped_outside_its_hours_and_says_until_when() -> None:
    job = _job(SCHEDULE)
    assert stopped_reason(job, "web", TUESDAY_NOON) is None
    reason = stopped_reason(job, "web", SATURDAY)
    assert reason is not None and "outside its schedule's hours" in reason
    assert "Mon 2026-12-07 08:00 CET" in reason and "vmplane start demo-fixed web" in reason
    state = pool_states(job, TUESDAY_NOON)["web"]
    assert state["state"] == "running" and state["nextChange"] == "stop Tue 2026-12-01 20:00 CET"


def test_a_pool_stopped_by_vmplane_stop_is_named_so_and_rotate_refuses_it() -> None:
    vms = [VMRecord(Name="demo-fixed-web-1", Pool="web", Index=1, ID="i-1", State=VMState.stopped,
                    LaunchTemplateVersion=1)]  # fmt: skip
    job = _job(infra=InfraConfig(VMs=vms, StoppedPools=["web"], LaunchTemplateVersion={"web": 2}))
    reason = stopped_reason(job, "web")
    assert reason is not None and "`vmplane stop`" in reason
    with pytest.raises(OperationError, match="cannot rotate: pool web is stopped"):
        plan_rotate(job, None)


def test_stop_and_start_plans() -> None:
    job = _job(SCHEDULE)
    op = powerops.plan_stop(job, "web")
    assert op.kind == "stop" and op.params == {"pool": "web"} and op.steps == ["stepStopPools", "stepRegisterSpace"]
    assert any("2 VMs stopped; their disks stay" in n for n in op.plan.notes)
    assert any("schedule is paused until `vmplane start`" in n for n in op.plan.notes)
    start = powerops.plan_start(_job(), None)
    assert start.params == {} and any("web is running: nothing to start" in n for n in start.plan.notes)
    with pytest.raises(OperationError, match="no pool 'db'"):
        powerops.plan_stop(job, "db")


def test_stop_needs_a_driver_that_can_stop_pools() -> None:
    job = _job()
    azure = job.model_copy(update={"config": {**job.config, "target": {"cloud": "azure", "region": "westeurope"}}})
    with pytest.raises(OperationError, match="the azure driver cannot stop pools"):
        powerops.plan_stop(azure, None)
