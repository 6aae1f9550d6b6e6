"""GCP schedules without a cloud: the instance schedule policy's body and name, the autoscaler's scaling
schedule and sizes (stopped, scheduled, plain), what stepValidate refuses naming the field, the verdict on
Google's service agent from a project policy, and the plan's lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.unit.support import make_ctx, variant

from vmplane.clouds.base import Tagger
from vmplane.clouds.gcp import mig, naming, plan, schedule_policy, schedules
from vmplane.clouds.gcp.driver import GcpDriver
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.session import GcpTarget
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.envspec.schedule import Schedule
from vmplane.state import InfraConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OFFICE = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
NIGHT = {"timezone": "Asia/Tokyo", "days": "Fri-Sun", "start": "22:00", "stop": "06:30"}
AGENT = "service-123@compute-system.iam.gserviceaccount.com"


def scheduled(web: dict[str, str] | None = OFFICE, api: dict[str, Any] | None = None) -> EnvSpec:
    pools: dict[str, Any] = {"web": {"mode": "fixed", "size": 2, "schedule": web}}
    if api is not None:
        pools["api"] = {"mode": "asg", "min": 2, "max": 4, "desired": 3, "targetCpuPercent": 60, **api}
    return variant(load_spec(EXAMPLES / "gcp-fixed.jsonc"), pools=pools)


def test_instance_schedule_policy_body_crons_in_the_zone_and_the_tag_set() -> None:
    spec = scheduled()
    sched = spec.pools["web"].schedule
    assert sched is not None
    name = schedule_policy.policy_name(spec, "web", sched)
    body = schedule_policy.policy_resource(Tagger.for_spec(spec, "job-1"), name, sched)
    assert body.name == name == naming.schedule_policy(spec, "web", schedule_policy.digest(sched))
    assert name.startswith(f"{spec.name}-web-sched-") and len(name) <= 63
    isp = body.instance_schedule_policy
    assert (isp.time_zone, isp.vm_start_schedule.schedule, isp.vm_stop_schedule.schedule) == (
        "Europe/Berlin",
        "0 8 * * 1,2,3,4,5",
        "0 19 * * 1,2,3,4,5",
    )
    assert '"zop:jobId":"job-1"' in body.description and '"zop:role":"schedule"' in body.description
    # Overnight: the stop comes the next day (Fri-Sun 22:00 -> Sat-Mon 06:30).
    night = Schedule.model_validate(NIGHT)
    isp = schedule_policy.policy_resource(Tagger.for_spec(spec, "job-1"), "n", night).instance_schedule_policy
    assert (isp.vm_start_schedule.schedule, isp.vm_stop_schedule.schedule) == ("0 22 * * 0,5,6", "30 6 * * 0,1,6")


def test_a_changed_schedule_is_a_new_policy_name_an_equal_one_is_not() -> None:
    a = Schedule.model_validate(OFFICE)
    assert schedule_policy.digest(a) == schedule_policy.digest(Schedule.model_validate(dict(OFFICE)))
    for change in ({"stop": "19:30"}, {"timezone": "Europe/Paris"}, {"days": "Mon-Sat"}):
        assert schedule_policy.digest(Schedule.model_validate({**OFFICE, **change})) != schedule_policy.digest(a)


def test_a_stopped_pool_follows_no_instance_schedule() -> None:
    spec = scheduled()
    want = schedule_policy.wanted_policies(spec, InfraConfig())
    assert list(want) == ["web"]
    assert schedule_policy.wanted_policies(spec, InfraConfig(StoppedPools=["web"])) == {}
    assert schedule_policy.wanted_policies(scheduled(web=None), InfraConfig()) == {}


def test_scaling_schedule_holds_the_pools_min_for_the_window() -> None:
    pool = AsgPool.model_validate({"mode": "asg", "min": 0, "max": 3, "desired": 1, "schedule": NIGHT})
    assert pool.schedule is not None
    s = schedule_policy.scaling_schedule(pool, pool.schedule)
    assert (s.schedule, s.duration_sec, s.min_required_replicas, s.time_zone) == (
        "0 22 * * 0,5,6",
        30600,
        1,
        "Asia/Tokyo",
    )
    two = pool.model_copy(update={"min": 2})
    assert schedule_policy.required_replicas(two) == 2


def test_autoscaler_min_0_with_a_schedule_mode_off_when_stopped_and_plain_otherwise() -> None:
    spec = scheduled(api={"schedule": OFFICE})
    pool = spec.pools["api"]
    assert isinstance(pool, AsgPool)
    ctx = make_ctx(spec)
    policy = mig.autoscaler_resource(ctx, "api", pool, "t").autoscaling_policy
    assert (policy.min_num_replicas, policy.max_num_replicas, policy.mode) == (0, 4, "ON")
    only = dict(policy.scaling_schedules)[schedule_policy.SCALING_SCHEDULE]
    assert (only.schedule, only.duration_sec, only.min_required_replicas) == ("0 8 * * 1,2,3,4,5", 39600, 2)
    stopped = make_ctx(spec, InfraConfig(StoppedPools=["api"]))
    assert mig.autoscaler_resource(stopped, "api", pool, "t").autoscaling_policy.mode == "OFF"
    assert mig.target_size(stopped, "api", pool) == 0 and mig.target_size(ctx, "api", pool) == 3
    plain = pool.model_copy(update={"schedule": None})
    policy = mig.autoscaler_resource(ctx, "api", plain, "t").autoscaling_policy
    assert policy.min_num_replicas == 2 and not policy.scaling_schedules
    # The comparison the patch decision uses: equal when only the proto's representation differs.
    want = mig.autoscaler_resource(ctx, "api", pool, "t").autoscaling_policy
    echoed = type(want).deserialize(type(want).serialize(want))
    assert mig.policy_shape(echoed) == mig.policy_shape(want) != mig.policy_shape(policy)


def test_validate_refuses_what_google_cannot_run_naming_the_field() -> None:
    driver = GcpDriver(GcpTarget(project="p", region="us-central1"))
    assert driver.capabilities.schedules
    assert driver.validate(scheduled(api={"schedule": OFFICE})) == []
    no_cpu = variant(scheduled(api={"schedule": OFFICE}), pools={"api": {"targetCpuPercent": None}})
    (problem,) = [p for p in driver.validate(no_cpu) if "schedule" in p]
    assert problem.startswith("pools.api.schedule:") and "pools.api.targetCpuPercent" in problem
    short = scheduled(api={"schedule": {**OFFICE, "start": "08:00", "stop": "08:03"}})
    (problem,) = driver.validate(short)
    assert problem.startswith("pools.api.schedule:") and "3 minutes" in problem and "at least 5" in problem
    assert driver.validate(scheduled(web={**OFFICE, "stop": "08:03"})) == []  # instance schedules: no minimum


def binding(role: str, *members: str, condition: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "members": list(members)}
    if condition:
        out["condition"] = {"expression": "request.time < timestamp('2020-01-01T00:00:00Z')"}
    return out


@pytest.mark.parametrize(
    ("bindings", "known", "verdict"),
    [
        ([binding("roles/compute.serviceAgent", f"serviceAccount:{AGENT}")], {}, "missing"),
        ([], {}, "missing"),
        ([binding("roles/compute.instanceAdmin.v1", f"serviceAccount:{AGENT}")], {}, "ok"),
        ([binding("roles/compute.instanceAdmin.v1", f"serviceAccount:{AGENT}", condition=True)], {}, "missing"),
        ([binding("roles/compute.instanceAdmin.v1", "user:bob@example.com")], {}, "missing"),
        (
            [binding("projects/p/roles/scheduler", f"serviceAccount:{AGENT}")],
            {"projects/p/roles/scheduler": {"compute.instances.start", "compute.instances.stop"}},
            "ok",
        ),
        (
            [binding("projects/p/roles/half", f"serviceAccount:{AGENT}")],
            {"projects/p/roles/half": {"compute.instances.start"}},
            "missing",
        ),
        ([binding("organizations/1/roles/unreadable", f"serviceAccount:{AGENT}")], {}, "unknown"),
    ],
)
def test_the_service_agent_verdict(bindings: list[dict[str, Any]], known: dict[str, set[str]], verdict: str) -> None:
    asked: list[str] = []

    def permissions_of(role: str) -> frozenset[str] | None:
        asked.append(role)
        return frozenset(known[role]) if role in known else None

    got, _roles = schedules.agent_verdict({"bindings": bindings}, AGENT, permissions_of)
    assert got == verdict
    assert "roles/compute.serviceAgent" not in asked  # known to lack them: never asked


def test_plan_lists_the_policy_and_the_scaling_schedule_and_teardown_the_recorded_policy() -> None:
    spec = scheduled(api={"schedule": OFFICE})
    out = plan.provision_resources(spec, InfraConfig(Zones=["us-central1-a", "us-central1-b"]), "p")
    (policy,) = [r for r in out if r.type == "google_compute_resource_policy"]
    web = spec.pools["web"]
    assert isinstance(web, FixedPool) and web.schedule is not None
    assert policy.name == schedule_policy.policy_name(spec, "web", web.schedule) and policy.step == "stepCreateVMs"
    assert "'0 8 * * 1,2,3,4,5'" in policy.detail and "Europe/Berlin" in policy.detail
    (scaler,) = [r for r in out if r.type == "google_compute_region_autoscaler"]
    assert (
        scaler.detail.startswith("min 0 / max 4, scaling schedule '0 8 * * 1,2,3,4,5'")
        and "11 h at min 2" in scaler.detail
    )
    infra = InfraConfig()
    gcp_ids(infra).SchedulePolicies = {"web": policy.name}
    (gone,) = [r for r in plan.teardown_resources(infra) if r.type == "google_compute_resource_policy"]
    assert (gone.name, gone.step) == (policy.name, "stepTerminateVMs")
