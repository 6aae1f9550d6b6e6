"""cost/history.py: what an environment has cost so far from its job's ledger, checked against hand
calculations from the pinned prices (2 x t3.small for 10 h then 4 for 5 h; a schedule over a weekend;
a stopped Fixed pool keeps its disks), and the ledger's bookkeeping (idempotent, capped, migrated)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tests.helpers import EXAMPLES
from tests.unit.support import variant

from vmplane.cost import history as h
from vmplane.cost.prices import AWS_US_EAST_1 as P
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec

T0 = datetime(2026, 1, 9, 0, 0, tzinfo=UTC)  # a Friday
WEEKDAYS = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "20:00"}
DISK_HOUR = P.disk_gb_month / 730  # per GB
# Per hour whatever the pools do (examples/fixed.jsonc: no LB): the NAT gateway, its data (100 GB a
# month, the stated assumption, prorated over 730 h) and its Elastic IP.
NETWORK_HOUR = P.nat_hour + 100 * P.nat_gb / 730 + P.public_ip_hour


@pytest.fixture(scope="module")
def fixed():
    return load_spec(EXAMPLES / "fixed.jsonc")  # pool web: Fixed, 2 x t3.small, 20 GB each


def sized(spec, n: int, mode: str = "fixed", schedule=None):
    pool = {"mode": "fixed", "size": n} if mode == "fixed" else {"mode": "asg", "min": 0, "desired": n, "max": 8}
    pool |= {"instanceType": "t3.small", "diskGb": 20} | ({"schedule": schedule} if schedule else {})
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return EnvSpec.model_validate({**doc, "pools": {"web": pool}})  # the whole pool replaced


def vm_hour(n: int) -> float:
    return n * (P.instance_hour["t3.small"] + 20 * DISK_HOUR)


def test_two_vms_for_ten_hours_then_four_for_five(fixed) -> None:
    ledger = h.append(None, h.entry(sized(fixed, 2), [], T0, "provisioned", "provision"))
    ledger = h.append(ledger, h.entry(sized(fixed, 4), [], T0 + timedelta(hours=10), "scale", "op-1"))
    got = h.cost_so_far(ledger, T0 + timedelta(hours=15))
    by_hand = vm_hour(2) * 10 + vm_hour(4) * 5 + NETWORK_HOUR * 15  # 0.832 + 0.066 + 0.927 ...
    assert got.amount == round(by_hand, 2)
    assert (got.since, got.until, got.ended, got.missing) == (T0.isoformat(), (T0 + timedelta(hours=15)).isoformat(),
                                                              False, [])  # fmt: skip
    assert any("first resource-creating step" in a for a in got.assumptions)


def test_a_weekday_schedule_bills_no_vm_hours_over_the_weekend(fixed) -> None:
    # Friday 00:00 UTC to Monday 00:00 UTC (01:00 in Berlin): only Friday 08:00-20:00 Berlin (07-19 UTC) runs.
    until = T0 + timedelta(days=3)
    for mode in ("fixed", "asg"):
        spec = sized(fixed, 2, mode, WEEKDAYS)
        e = h.entry(spec, [], T0, "provisioned", "provision")
        assert e["schedules"] == {"web": WEEKDAYS}
        followed = {r["kind"] for r in e["rates"] if r["follows"] == "web"}
        # A stopped Fixed VM keeps its disk (billed 72 h); a scaling group at 0 has none (12 h).
        assert followed == ({"instance"} if mode == "fixed" else {"instance", "disk"})
        disk_hours = 72 if mode == "fixed" else 12
        by_hand = 2 * P.instance_hour["t3.small"] * 12 + 2 * 20 * DISK_HOUR * disk_hours + NETWORK_HOUR * 72
        assert h.cost_so_far(h.append(None, e), until).amount == round(by_hand, 2), mode


def test_a_stopped_fixed_pool_keeps_its_disk_cost_a_stopped_group_does_not(fixed) -> None:
    for mode, disk in (("fixed", 2 * 20 * DISK_HOUR), ("asg", 0.0)):
        spec = sized(fixed, 2, mode)
        ledger = h.append(None, h.entry(spec, [], T0, "provisioned", "provision"))
        stopped = h.entry(spec, ["web"], T0 + timedelta(hours=4), "stop", "op-stop")
        assert stopped["stopped"] == ["web"]
        assert {r["kind"]: r["hourly"] for r in stopped["rates"] if r["pool"] == "web"} == {
            "instance": 0.0,
            "disk": pytest.approx(disk),
        }
        ledger = h.append(ledger, stopped)
        got = h.cost_so_far(ledger, T0 + timedelta(hours=10))
        assert got.amount == round(vm_hour(2) * 4 + disk * 6 + NETWORK_HOUR * 10, 2), mode


def test_teardown_ends_billing_and_a_phase_end_is_recorded_once(fixed) -> None:
    spec = sized(fixed, 2)
    ledger = h.append(None, h.entry(spec, [], T0, "provisioned", "provision"))
    again = h.append(ledger, h.entry(spec, [], T0 + timedelta(hours=1), "provisioned", "provision"))
    assert again["entries"] == ledger["entries"]  # a crash re-ran finish_job: still one entry
    ledger = h.append(ledger, h.ended(T0 + timedelta(hours=3)))
    got = h.cost_so_far(ledger, T0 + timedelta(days=30))
    assert got.ended and got.amount == round((vm_hour(2) + NETWORK_HOUR) * 3, 2)
    assert got.until == (T0 + timedelta(hours=3)).isoformat()


def test_the_cap_folds_old_entries_without_losing_their_cost(fixed) -> None:
    full = folded = None
    for i, n in enumerate((2, 3, 4, 1)):
        e = h.entry(sized(fixed, n), [], T0 + timedelta(hours=2 * i), "scale", f"op-{i}")
        full, folded = h.append(full, e), h.append(folded, e, cap=2)
    assert len(folded["entries"]) == 2 and folded["carriedUntil"] == (T0 + timedelta(hours=4)).isoformat()
    now = T0 + timedelta(hours=9)
    assert h.cost_so_far(folded, now).amount == h.cost_so_far(full, now).amount
    assert h.cost_so_far(folded, now).since == T0.isoformat()


def test_a_missing_price_is_named_never_counted_as_zero(fixed) -> None:
    spec = variant(fixed, pools={"web": {"mode": "fixed", "size": 2, "instanceType": "x9.huge"}})
    got = h.cost_so_far(h.append(None, h.entry(spec, [], T0, "provisioned", "provision")), T0 + timedelta(hours=1))
    assert got.missing and "x9.huge" in got.missing[0] and got.to_json()["complete"] is False


def test_record_finish_dates_provisioning_at_its_first_resource_step(fixed) -> None:
    config = {"spec": sized(fixed, 2).model_dump(mode="json", by_alias=True), "infra": {}, "costLedger": h.new_ledger()}
    steps = [
        {"name": "stepValidate", "startedAt": "2026-01-09T00:00:00+00:00"},
        {"name": "stepCreateIAM", "startedAt": "2026-01-09T00:00:07+00:00"},
        {"name": "stepCreateNetwork", "startedAt": "2026-01-09T00:00:05+00:00"},
        {"name": "stepFinalize", "startedAt": None},
    ]
    ledger = h.record_finish(config, steps, "provision", T0, T0 + timedelta(minutes=3))
    assert [(e["event"], e["at"]) for e in ledger["entries"]] == [("provisioned", "2026-01-09T00:00:05+00:00")]
    config |= {"costLedger": ledger, "operation": {"id": "op-9", "kind": "stop"}, "infra": {"StoppedPools": ["web"]}}
    ledger = h.record_finish(config, [], "operation", T0, T0 + timedelta(hours=1))
    assert [(e["event"], e["key"], e["stopped"]) for e in ledger["entries"]][1] == ("stop", "op-9", ["web"])


def test_an_old_job_without_a_ledger_is_costed_from_its_creation_and_says_so(fixed) -> None:
    config = {"spec": sized(fixed, 2).model_dump(mode="json", by_alias=True), "infra": {}}
    created = datetime(2026, 1, 9)  # naive, as SQLite returns it: UTC
    got = h.job_cost_so_far(config, created, T0 + timedelta(hours=2))
    assert got.amount == round((vm_hour(2) + NETWORK_HOUR) * 2, 2)
    assert any("no cost history on this job" in a for a in got.assumptions)


def test_cloud_nat_is_billed_per_vm_hour_so_it_follows_the_pools_schedule_and_stop() -> None:
    from vmplane.cost.prices import GCP_US_CENTRAL1 as G

    gcp = load_spec(EXAMPLES / "gcp-fixed.jsonc")  # 2 x e2-small, 20 GB pd-balanced, no LB
    doc = gcp.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec = EnvSpec.model_validate({**doc, "pools": {"web": {**doc["pools"]["web"], "schedule": WEEKDAYS}}})
    e = h.entry(spec, [], T0, "provisioned", "provision")
    (nat,) = [r for r in e["rates"] if r["kind"] == "nat"]
    assert (nat["pool"], nat["follows"], nat["hourly"]) == ("web", "web", pytest.approx(2 * G.nat_hour))
    weekend = h.cost_so_far(h.append(None, e), T0 + timedelta(days=3)).amount  # 12 running hours, as above
    vm = 2 * (G.instance_hour["e2-small"] + G.nat_hour)
    always = 2 * 20 * G.disk_gb_month / 730 + 100 * G.nat_gb / 730 + G.public_ip_hour  # disks, NAT data, its address
    assert weekend == round(vm * 12 + always * 72, 2)
    stopped = h.entry(spec, ["web"], T0, "stop", "op-1")  # stopped until `vmplane start`: schedule paused
    assert [r["hourly"] for r in stopped["rates"] if r["kind"] == "nat"] == [0.0]
    assert stopped["overrides"] == {}


def test_vmplane_stop_holds_a_scheduled_pool_and_start_overrides_its_schedule_until_the_next_stop(fixed) -> None:
    spec = sized(fixed, 2, "fixed", WEEKDAYS)  # Berlin 08-20 = 07-19 UTC in January
    vm = 2 * P.instance_hour["t3.small"]
    always = 2 * 20 * DISK_HOUR + NETWORK_HOUR  # disks of stopped Fixed VMs stay billed

    # Stopped Friday 10:00 UTC: the schedule is paused, so no VM-hour until `vmplane start`, Monday included.
    first = h.entry(spec, [], T0, "provisioned", "provision")
    stop = h.entry(spec, ["web"], T0 + timedelta(hours=10), "stop", "op-1", previous=first)
    assert stop["overrides"] == {} and stop["stopped"] == ["web"]
    monday_noon = T0 + timedelta(days=3, hours=12)
    scale = h.entry(spec, ["web"], T0 + timedelta(days=1), "scale", "op-2", previous=stop)
    ledger = h.append(h.append(h.append(None, first), stop), scale)
    got = h.cost_so_far(ledger, monday_noon).amount
    assert got == round(vm * 3 + always * 84, 2)  # Friday 07-10 UTC only

    # Started Saturday 10:00 UTC, outside its hours: runs until the schedule's next stop, Monday 19:00 UTC.
    start = h.entry(spec, [], T0 + timedelta(days=1, hours=10), "start", "op-3", started=["web"], previous=scale)
    assert start["overrides"] == {"web": {"on": True, "until": "2026-01-12T19:00:00+00:00"}}
    tuesday = T0 + timedelta(days=4)
    got = h.cost_so_far(h.append(None, start), tuesday).amount  # Saturday 10:00 to Tuesday 00:00
    assert got == round(vm * (14 + 24 + 19) + always * 62, 2)  # Saturday, Sunday, Monday to 19:00
