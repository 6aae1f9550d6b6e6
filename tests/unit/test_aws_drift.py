"""AWS drift's expectations and normal forms, without a cloud: what a Fixed VM's power must be (its
schedule, `vmplane stop`), and how rules and routes compare whatever way EC2 groups them. The cases made
out of band on the sandbox are in tests/integration/test_aws_drift.py."""

from __future__ import annotations

from datetime import UTC, datetime

from vmplane.clouds.aws import drift
from vmplane.clouds.aws.resource_parts import routes
from vmplane.clouds.aws.security_groups import perm_rules
from vmplane.clouds.drift import Observed, compare
from vmplane.envspec.load import load_spec
from vmplane.state import InfraConfig, VMRecord, VMState

from .support import make_ctx, variant

SCHEDULE = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
MONDAY_NOON = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)  # 12:00 in Berlin: inside the hours
SUNDAY = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)  # outside them


def _ctx(schedule: dict[str, str] | None = None, stopped_pools: list[str] | None = None):
    spec = load_spec("examples/fixed.jsonc")
    if schedule is not None:
        spec = variant(spec, pools={"web": {"schedule": schedule}})
    vms = [VMRecord(Name=f"demo-fixed-web-{i}", Pool="web", Index=i, ID=f"i-{i}", State=VMState.ready) for i in (0, 1)]
    return make_ctx(spec, InfraConfig(VMs=vms, StoppedPools=stopped_pools or []))


def _power(ctx, now: datetime) -> dict[str, object]:
    wanted = [e for e in drift.expected(ctx, [], now) if e.kind == "instance"]
    assert [e.id for e in wanted] == ["i-0", "i-1"]
    return dict(wanted[0].fields)


def test_a_vm_without_a_schedule_must_run() -> None:
    assert _power(_ctx(), SUNDAY) == {"state": "running"}


def test_a_scheduled_vm_must_run_only_in_its_hours() -> None:
    ctx = _ctx(SCHEDULE)
    assert _power(ctx, MONDAY_NOON) == {"state": "running"}
    assert _power(ctx, SUNDAY) == {}  # the scheduler stops it: stopped or not yet, neither is drift


def test_a_pool_held_by_vmplane_stop_is_not_started() -> None:
    assert _power(_ctx(stopped_pools=["web"]), MONDAY_NOON) == {}


def test_a_stopped_vm_outside_its_hours_is_no_drift_and_inside_them_is() -> None:
    ctx = _ctx(SCHEDULE)
    tags = drift.job_tags(ctx)
    seen = [Observed("instance", f"i-{i}", f"demo-fixed-web-{i}", tags, {"state": "stopped"}) for i in (0, 1)]
    only_vms = lambda now: [e for e in drift.expected(ctx, seen, now) if e.kind == "instance"]  # noqa: E731
    assert [d for d in compare(only_vms(SUNDAY), seen) if d.kind == "instance"] == []
    found = compare(only_vms(MONDAY_NOON), seen)
    assert [(d.id, d.change.value, d.fields[0].actual) for d in found] == [
        ("i-0", "changed", "stopped"),
        ("i-1", "changed", "stopped"),
    ]


def test_rules_compare_one_source_at_a_time_whatever_the_grouping() -> None:
    grouped = [
        {
            "IpProtocol": "tcp",
            "FromPort": 80,
            "ToPort": 80,
            "IpRanges": [{"CidrIp": "10.0.0.0/16", "Description": "x"}, {"CidrIp": "0.0.0.0/0"}],
            "UserIdGroupPairs": [{"GroupId": "sg-1"}],
        },
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"IpProtocol": "tcp", "FromPort": 1000, "ToPort": 2000, "Ipv6Ranges": [{"CidrIpv6": "::/0"}]},
    ]
    split = [
        {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]},
        {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "UserIdGroupPairs": [{"GroupId": "sg-1"}]},
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"IpProtocol": "tcp", "FromPort": 1000, "ToPort": 2000, "Ipv6Ranges": [{"CidrIpv6": "::/0"}]},
    ]
    assert (
        perm_rules(grouped)
        == perm_rules(split)
        == [
            "all 0.0.0.0/0",
            "tcp/1000-2000 ::/0",
            "tcp/80 0.0.0.0/0",
            "tcp/80 10.0.0.0/16",
            "tcp/80 sg-1",
        ]
    )


def test_routes_leave_out_the_local_one_and_say_a_blackhole() -> None:
    table = {
        "Routes": [
            {"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local", "State": "active"},
            {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-1", "State": "blackhole"},
        ]
    }
    assert routes(table) == ["0.0.0.0/0 -> nat-1 (blackhole)"]
