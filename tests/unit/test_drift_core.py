"""The neutral drift comparison, the repair step's place in a plan, and how a plan counts repairs."""

from __future__ import annotations

from vmplane.clouds.drift import Drift, DriftChange, Expected, FieldDrift, Observed, compare, counts
from vmplane.jobs.drift import with_repair
from vmplane.pipeline.plan import PROVISION_STEPS, Plan, PlanKind, step_graph, waves
from vmplane.pipeline.steps import DEFAULT_DEPENDS


def _vm(name: str, vid: str | None = None, **fields: object) -> Expected:
    return Expected(f"aws_instance.{name}", "instance", vid, name, fields=fields, tags={"env": "demo"})


def test_missing_changed_and_extra_each_found_once() -> None:
    expected = [_vm("web-0", "i-1", state="running"), _vm("web-1", "i-2", state="running")]
    observed = [
        Observed("instance", "i-1", "web-0", {"env": "demo"}, {"state": "stopped"}),
        Observed("instance", "i-9", "stray", {"env": "demo"}, {"state": "running"}),
        Observed("vpc", "vpc-1", "net", {}, {}),  # read to compare, not of an extra kind: not reported
    ]
    found = compare(expected, observed, extra_kinds=["instance"])
    assert [(d.resource, d.change, d.id) for d in found] == [
        ("aws_instance.web-0", DriftChange.changed, "i-1"),
        ("aws_instance.web-1", DriftChange.missing, "i-2"),
        ("instance.stray", DriftChange.extra, "i-9"),
    ]
    assert found[0].fields == (FieldDrift("state", "running", "stopped"),)
    assert counts(found) == {("instance", "changed"): 1, ("instance", "missing"): 1, ("instance", "extra"): 1}


def test_a_removed_tag_is_drift_and_a_tag_someone_added_is_not() -> None:
    want = [_vm("web-0", "i-1")]
    assert compare(want, [Observed("instance", "i-1", "web-0", {"env": "demo", "owner": "ops"}, {})]) == []
    (d,) = compare(want, [Observed("instance", "i-1", "web-0", {}, {})])
    assert d.fields == (FieldDrift("tags.env", "demo", None),)


def test_without_a_recorded_id_the_name_matches_and_an_id_never_matches_another_resource() -> None:
    named = Expected("aws_vpc.net", "vpc", None, "net")
    assert compare([named], [Observed("vpc", "vpc-7", "net")]) == []
    by_id = Expected("aws_vpc.net", "vpc", "vpc-1", "net")
    (d,) = compare([by_id], [Observed("vpc", "vpc-7", "net")])
    assert d.change is DriftChange.missing


def test_the_users_resource_is_reported_never_repaired() -> None:
    theirs = Expected("aws_security_group.default", "security-group", "sg-1", fields={"rules": []}, owned=False)
    (d,) = compare([theirs], [Observed("security-group", "sg-1", fields={"rules": ["tcp/22 0.0.0.0/0"]})])
    assert not d.repairable and "not vmplane's" in d.repair
    assert d.to_json()["fields"] == [{"field": "rules", "wanted": [], "actual": ["tcp/22 0.0.0.0/0"]}]


def test_the_repair_comes_right_after_validation_and_every_later_step_waits_for_it() -> None:
    steps = with_repair(list(PROVISION_STEPS))
    assert steps[:2] == ["stepValidate", "stepRepairDrift"]
    assert with_repair(steps) == steps  # idempotent
    graph = step_graph(steps, DEFAULT_DEPENDS)
    for name in steps[2:]:
        assert "stepRepairDrift" in graph[name], name
    assert waves(steps, DEFAULT_DEPENDS)[:2] == [["stepValidate"], ["stepRepairDrift"]]


def test_a_plan_counts_repairs_by_what_they_do_and_not_the_reported_ones() -> None:
    def drift(change: DriftChange, repairable: bool = True) -> Drift:
        return Drift("aws_instance.x", "instance", "i-1", change, repairable=repairable)

    plan = Plan(PlanKind.repair, "demo", "aws", ["stepRepairDrift"])
    assert plan.summary == "No changes."
    plan.repairs = [drift(DriftChange.missing), drift(DriftChange.changed), drift(DriftChange.extra),
                    drift(DriftChange.changed, repairable=False)]  # fmt: skip
    assert plan.counts() == {"add": 1, "change": 1, "destroy": 1}
    assert plan.summary == "Plan: 1 to add, 1 to change, 1 to destroy."
    assert len(plan.to_json()["repairs"]) == 4
