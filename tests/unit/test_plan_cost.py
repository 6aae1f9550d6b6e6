"""The cost in a plan's JSON and text: a new environment's estimate, and for a change the estimate
before and after and the difference (a larger pool, an added load balancer, a schedule), checked against
hand calculations from the pinned prices; the estimate recorded on the job and returned with it."""

from __future__ import annotations

import pytest
from rich.console import Console
from tests.unit.support import variant

from vmplane.cli.render import show_plan
from vmplane.cost.prices import AWS_US_EAST_1 as P
from vmplane.envspec.models import LoadBalancer
from vmplane.jobs import operations as ops
from vmplane.jobs import service as svc
from vmplane.jobs.service import JobStatus
from vmplane.pipeline.plan import provision_steps
from vmplane.settings import Settings
from vmplane.store import db
from vmplane.target import Target

H = 730
WEEKDAYS = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "20:00"}


def money(x: float) -> float:
    return round(x, 2)


# examples/fixed.jsonc by hand: 2 x t3.small, 2 x 20 GB gp3, a NAT gateway, 100 GB through it, its EIP.
FIXED_TOTAL = money(
    money(2 * P.instance_hour["t3.small"] * H)
    + money(2 * 20 * P.disk_gb_month)
    + money(P.nat_hour * H)
    + money(100 * P.nat_gb)
    + money(P.public_ip_hour * H)
)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(home=tmp_path)


@pytest.fixture
def target(spec) -> Target:
    return Target.for_spec(spec, "http://127.0.0.1:1")


@pytest.fixture
def no_objection(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new job's plan asks the cloud what stepValidate would refuse (jobs/precheck.py); no cloud runs
    here and these tests are about the cost, so the answer is "nothing" (the precheck itself is tested in
    test_precheck.py and against the sandbox)."""
    from vmplane.jobs import precheck

    monkeypatch.setattr(precheck, "problems", lambda *_a: [])


def applied(settings, spec, target):
    with db.transaction(settings.db_url) as s:
        row = svc.create_job(s, spec, target, provision_steps(spec))
        svc.set_status(s, row.id, JobStatus.succeeded)
        return svc.view(svc.get_row(s, row.id))


def text_of(plan) -> str:
    con = Console(record=True, width=200, color_system=None)
    show_plan(con, plan)
    return con.export_text()


def test_a_new_environment_shows_its_monthly_estimate(settings, spec, target, no_objection) -> None:
    ap = ops.plan_apply(settings, spec, target)
    cost = ap.to_json()["cost"]
    assert cost["after"] == {"total": FIXED_TOTAL, "scheduledTotal": None, "savingPercent": None}
    assert (cost["before"], cost["delta"], cost["complete"], cost["currency"]) == (None, None, True, "USD")
    assert f"Cost: ~ {FIXED_TOTAL:.2f} USD/month" in text_of(ap.plan)


def test_a_larger_pool_shows_the_added_vm_and_disk(settings, spec, target) -> None:
    op = ops.plan_scale(applied(settings, spec, target), "web", min_size=None, max_size=None, desired=3)
    cost = op.plan.to_json()["cost"]
    vm, disk = money(3 * P.instance_hour["t3.small"] * H) - money(2 * P.instance_hour["t3.small"] * H), 20 * 0.08
    assert cost["before"]["total"] == FIXED_TOTAL
    assert cost["delta"] == {"total": money(vm + disk), "scheduledTotal": money(vm + disk)}  # 15.18 + 1.60
    assert [(x["kind"], x["delta"]) for x in cost["lines"]] == [("disk", money(disk)), ("instance", money(vm))]
    assert f"(+{vm + disk:.2f}, was {FIXED_TOTAL:.2f})" in text_of(op.plan)


def test_an_added_load_balancer_adds_its_hours_capacity_and_addresses(settings, spec, target) -> None:
    op = ops.plan_attach_lb(applied(settings, spec, target), LoadBalancer(domain="a.example.test"))
    cost = op.plan.to_json()["cost"]
    lb, lcu = money(P.lb_hour * H), money(P.lb_capacity_unit_hour * 1 * H)  # 1 LCU: the stated assumption
    ips = money(3 * P.public_ip_hour * H) - money(1 * P.public_ip_hour * H)  # + one address per ALB zone (2)
    assert cost["delta"]["total"] == money(lb + lcu + ips)
    assert {x["kind"] for x in cost["lines"]} == {"loadBalancer", "loadBalancerCapacity", "publicIp"}


def test_an_added_schedule_saves_a_negative_scheduled_delta(settings, spec, target) -> None:
    job = applied(settings, spec, target)
    # refresh=False: the file against the record only (no cloud here); the refresh that reads the
    # cloud first is tested on the sandboxes (test_<cloud>_drift.py).
    ap = ops.plan_update(variant(spec, pools={"web": {"schedule": WEEKDAYS}}), target, job, refresh=False)
    cost = ap.to_json()["cost"]
    vms = 2 * P.instance_hour["t3.small"]
    saving = money(vms * H) - money(vms * H * 60 / 168)  # 60 of 168 weekly hours run; disks stay billed
    assert cost["delta"] == {"total": 0.0, "scheduledTotal": -money(saving)}
    assert cost["after"]["scheduledTotal"] == money(FIXED_TOTAL - saving)
    (line,) = cost["lines"]
    assert (line["kind"], line["delta"], line["scheduledDelta"]) == ("instance", 0.0, -money(saving))
    assert f"with the schedules ~ {FIXED_TOTAL - saving:.2f} (-{saving:.2f})" in text_of(ap.plan)


def test_teardown_shows_what_stops_being_billed_and_missing_prices_are_named(
    settings, spec, target, no_objection
) -> None:
    plan = ops.plan_destroy(settings, applied(settings, spec, target))
    assert plan.to_json()["cost"]["delta"]["total"] == -FIXED_TOTAL
    odd = variant(spec, name="odd", pools={"web": {"instanceType": "x9.huge"}})
    ap = ops.plan_apply(settings, odd, target)
    assert ap.to_json()["cost"]["complete"] is False
    assert "missing price: pools.web.instanceType: no price for x9.huge" in text_of(ap.plan)


def test_the_job_records_its_estimate_and_returns_it(settings, spec, target) -> None:
    job = applied(settings, spec, target)
    assert job.to_json()["costEstimate"]["monthly"]["total"] == FIXED_TOTAL
    op = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3)
    ops.begin_operation(settings, op)
    with db.transaction(settings.db_url) as s:
        after = svc.view(svc.get_row(s, job.id)).to_json()["costEstimate"]
    assert after["monthly"]["total"] == money(FIXED_TOTAL + op.plan.cost["delta"]["total"])
    assert [x["count"] for x in after["lines"] if x["kind"] == "instance"] == [3]
