"""`vmplane cost`: line items from the pinned prices checked against a hand calculation, the schedule's
saving computed from its hours, missing prices named (never 0), and schedules validated at line:col."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from tests.helpers import EXAMPLES
from tests.unit.support import variant

from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.base import capability_problems
from vmplane.cost.estimate import estimate
from vmplane.cost.prices import AWS_US_EAST_1 as P
from vmplane.envspec.load import SpecError, load_spec, parse_spec_text
from vmplane.envspec.models import Cloud
from vmplane.envspec.schedule import Schedule

WEEKDAYS_8_TO_20 = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "20:00"}


def test_fixed_example_matches_a_hand_calculation_line_by_line() -> None:
    est = estimate(load_spec(EXAMPLES / "fixed.jsonc"))  # 2 x t3.small, 20 GB each, no LB, us-east-1
    got = {(line.kind, line.pool): line.monthly for line in est.lines}
    by_hand = {
        ("instance", "web"): round(2 * P.instance_hour["t3.small"] * 730, 2),  # 30.37
        ("disk", "web"): round(2 * 20 * P.disk_gb_month, 2),  # 3.20
        ("nat", None): round(P.nat_hour * 730, 2),  # 32.85
        ("natData", None): round(100 * P.nat_gb, 2),  # 4.50: the stated 100 GB assumption
        ("publicIp", None): round(1 * P.public_ip_hour * 730, 2),  # the NAT's EIP
    }
    assert got == by_hand
    doc = est.to_json()
    assert doc["monthly"] == {"total": round(sum(by_hand.values()), 2), "scheduledTotal": None, "savingPercent": None}
    assert doc["complete"] is True and doc["currency"] == "USD"
    a = doc["assumptions"]
    assert (a["hoursPerMonth"], a["natGbPerMonth"], a["region"]) == (730.0, 100.0, "us-east-1")
    assert a["prices"]["recorded"] == P.recorded and a["prices"]["source"] == P.source


def test_the_load_balancer_adds_its_hours_capacity_and_addresses() -> None:
    est = estimate(load_spec(EXAMPLES / "web.jsonc"), lb_capacity_units=2)  # ALB over 2 zones
    got = {line.kind: line for line in est.lines}
    assert got["loadBalancer"].monthly == round(P.lb_hour * 730, 2)
    assert got["loadBalancerCapacity"].monthly == round(2 * P.lb_capacity_unit_hour * 730, 2)
    assert got["publicIp"].count == 1 + 2  # the NAT's EIP and one per ALB zone
    assert est.assumptions["lbCapacityUnits"] == 2


def test_a_weekday_schedule_saves_60_to_70_percent_of_a_ten_vm_pool() -> None:
    spec = variant(
        load_spec(EXAMPLES / "fixed.jsonc"), pools={"web": {"mode": "fixed", "size": 10, "schedule": WEEKDAYS_8_TO_20}}
    )
    est = estimate(spec)
    (vms,) = [line for line in est.lines if line.kind == "instance"]
    schedule = Schedule.model_validate(WEEKDAYS_8_TO_20)
    assert schedule.weekly_hours() == 5 * 12
    expected = 100 * (1 - schedule.weekly_hours() / 168)  # from the schedule, not a constant
    assert vms.monthly is not None and vms.scheduledMonthly is not None
    saving = 100 * (vms.monthly - vms.scheduledMonthly) / vms.monthly
    assert saving == pytest.approx(expected, abs=0.05) and 60 <= saving <= 70
    # Stopped VMs keep their disks and the NAT runs on: the whole environment saves less, and says so.
    (disk,) = [line for line in est.lines if line.kind == "disk"]
    assert disk.scheduledMonthly == disk.monthly
    doc = est.to_json()["monthly"]
    assert doc["scheduledTotal"] < doc["total"] and 0 < doc["savingPercent"] < saving


def test_an_overnight_schedule_and_wrapping_day_ranges() -> None:
    night = Schedule.model_validate({"timezone": "UTC", "days": "Fri-Mon", "start": "22:00", "stop": "06:00"})
    assert night.hours_per_day() == 8 and night.weekly_hours() == 4 * 8


def test_a_missing_price_is_named_and_fails_strict(tmp_path) -> None:
    spec = variant(
        load_spec(EXAMPLES / "fixed.jsonc"), pools={"web": {"mode": "fixed", "size": 2, "instanceType": "x9.huge"}}
    )
    est = estimate(spec)
    assert est.missing == ["pools.web.instanceType: no price for x9.huge in aws us-east-1"]
    (vms,) = [line for line in est.lines if line.kind == "instance"]
    assert vms.unitPrice is None and vms.monthly is None  # not counted as 0
    path = tmp_path / "env.json"
    path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    env = {"VMPLANE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-m", "vmplane", "cost", "-f", str(path), "-o", "json"]
    loose = subprocess.run(run, capture_output=True, text=True, env=env, check=False)
    assert loose.returncode == 0 and json.loads(loose.stdout)["complete"] is False
    strict = subprocess.run([*run, "--strict"], capture_output=True, text=True, env=env, check=False)
    assert strict.returncode == 1


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({**WEEKDAYS_8_TO_20, "timezone": "Mars/Olympus"}, "not an IANA time zone"),
        ({**WEEKDAYS_8_TO_20, "days": "Mon-Fry"}, "'Mon-Fry': days are"),
        ({**WEEKDAYS_8_TO_20, "start": "8am"}, "not a time of day"),
        ({**WEEKDAYS_8_TO_20, "stop": "08:00"}, "start and stop are the same time"),
    ],
)
def test_schedules_are_validated_at_their_line(schedule: dict, message: str) -> None:
    doc = load_spec(EXAMPLES / "fixed.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["pools"]["web"]["schedule"] = schedule
    with pytest.raises(SpecError) as err:
        parse_spec_text(json.dumps(doc, indent=2), "env.jsonc")
    (issue,) = err.value.issues
    assert issue.path.startswith("pools.web.schedule") and message in issue.message and issue.line > 1


def test_a_driver_without_schedules_refuses_one_in_validation() -> None:
    pools = {"web": {"mode": "fixed", "size": 2, "schedule": WEEKDAYS_8_TO_20}}
    spec = variant(load_spec(EXAMPLES / "fixed.jsonc"), pools=pools)
    without = dataclasses.replace(AwsDriver.capabilities, schedules=False)
    problems = capability_problems(spec, without, Cloud.aws)
    assert any(p.startswith("pools.web.schedule: the aws driver does not run schedules yet") for p in problems)
    assert not capability_problems(spec, AwsDriver.capabilities, Cloud.aws)  # the AWS driver runs them


def test_the_dev_schedule_example_prices_both_pools_schedules() -> None:
    spec = load_spec(EXAMPLES / "dev-schedule.jsonc")
    assert capability_problems(spec, AwsDriver.capabilities, Cloud.aws) == []  # AWS runs both kinds
    est = estimate(spec)
    share = 55 / 168  # Mon-Fri 08:00-19:00
    by = {(line.kind, line.pool): line for line in est.lines}
    assert by[("instance", "web")].scheduledMonthly == round(2 * P.instance_hour["t3.small"] * 730 * share, 2)
    assert by[("instance", "workers")].scheduledMonthly == round(2 * P.instance_hour["t3.medium"] * 730 * share, 2)
    # The stopped Fixed pool keeps its disks; the group scaled to 0 has none.
    assert by[("disk", "web")].scheduledMonthly == by[("disk", "web")].monthly
    assert by[("disk", "workers")].scheduledMonthly == round(60 * P.disk_gb_month * share, 2)
    assert est.saving_percent() is not None and 40 < est.saving_percent() < 50  # the NAT runs around the clock


def test_a_proxmox_environment_is_not_priced_and_says_why() -> None:
    from vmplane.envspec.starter import render_starter

    spec = parse_spec_text(render_starter("lab", "acme", cloud=Cloud.proxmox), "lab.jsonc")
    est = estimate(spec)
    assert est.lines == [] and est.total() == 0
    assert est.missing == ["proxmox: the VMs run on your own Proxmox VE hardware, which has no list price to estimate"]
    assert est.to_json()["complete"] is False
