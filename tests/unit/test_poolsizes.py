"""jobs/poolsizes.py: the VMs a size change adds and removes are plan lines, and `scale` says when the
file (as last applied) no longer matches the pool."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vmplane.clouds.base import Action
from vmplane.clouds.registry import driver_for
from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError
from vmplane.jobs import operations as ops
from vmplane.jobs import poolsizes
from vmplane.jobs import service as svc
from vmplane.jobs.service import JobStatus
from vmplane.pipeline.plan import provision_steps
from vmplane.state import InfraConfig, VMRecord, VMState
from vmplane.store import db
from vmplane.target import Target

from .support import variant


@pytest.fixture
def url(tmp_path):
    return "sqlite:///" + str(tmp_path / "x.db")


def _target(spec: EnvSpec) -> Target:
    return Target.for_spec(spec, "http://127.0.0.1:4566")


def _vms(pool: str, n: int, prefix: str = "demo-fixed-web") -> list[VMRecord]:
    return [VMRecord(Name=f"{prefix}-{i}", Pool=pool, Index=i, ID=f"i-{i:04d}", State=VMState.ready) for i in range(n)]


def _applied(url, spec, infra=None):
    with db.transaction(url) as s:
        row = svc.create_job(s, spec, _target(spec), provision_steps(spec))
        svc.set_status(s, row.id, JobStatus.succeeded)
        if infra is not None:
            svc.save_infra(s, row.id, infra)
        return svc.view(svc.get_row(s, row.id))


def _run(url, op):
    """Record the operation as `vmplane scale` does, and let it succeed (its steps are the cloud's part)."""
    with db.transaction(url) as s:
        svc.begin_operation(s, op.job.id, op.kind, op.params, op.steps, spec=op.spec)
        svc.set_status(s, op.job.id, JobStatus.succeeded)
        return svc.view(svc.get_row(s, op.job.id))


def _sized(spec: EnvSpec, size: int) -> EnvSpec:
    return variant(spec, pools={"web": {"size": size}})


def test_a_smaller_fixed_pool_destroys_its_highest_numbered_vms_by_name_and_id(spec):
    infra = InfraConfig(VMs=_vms("web", 3))
    out = poolsizes.size_resources(driver_for(_target(spec)), _sized(spec, 3), _sized(spec, 1), infra)
    assert [(r.action, r.type, r.name, r.step) for r in out] == [
        (Action.destroy, "aws_instance", "demo-fixed-web-1", "stepCreateVMs"),
        (Action.destroy, "aws_instance", "demo-fixed-web-2", "stepCreateVMs"),
    ]
    assert out[0].detail.startswith("i-0001: terminated")
    # No load balancer: nothing to drain, so the line does not claim it.
    assert "load balancer" not in out[0].detail
    with_lb = infra.model_copy(update={"LoadBalancerID": "arn:lb"})
    lb_out = poolsizes.size_resources(driver_for(_target(spec)), _sized(spec, 3), _sized(spec, 2), with_lb)
    assert "after leaving the load balancer" in lb_out[0].detail


def test_a_bigger_fixed_pool_adds_the_drivers_vm_lines_and_nothing_recorded(spec):
    infra = InfraConfig(VMs=_vms("web", 2))
    out = poolsizes.size_resources(driver_for(_target(spec)), _sized(spec, 2), _sized(spec, 4), infra)
    assert [(r.action, r.type, r.name) for r in out] == [
        (Action.create, "aws_instance", "demo-fixed-web-2"),
        (Action.create, "aws_instance", "demo-fixed-web-3"),
    ]
    # Same sizes: no line, whatever else changed.
    assert poolsizes.size_resources(driver_for(_target(spec)), _sized(spec, 2), _sized(spec, 2), infra) == []


def test_an_intent_without_a_cloud_id_is_not_a_destruction(spec):
    infra = InfraConfig(VMs=[*_vms("web", 2), VMRecord(Name="demo-fixed-web-2", Pool="web", Index=2)])
    out = poolsizes.size_resources(driver_for(_target(spec)), _sized(spec, 3), _sized(spec, 2), infra)
    assert out == []


def test_proxmox_lines_use_its_types_and_count_each_vms_iso(spec):
    pve = EnvSpec.model_validate(
        {
            "name": "lab",
            "org": "acme",
            "provider": {"cloud": "proxmox", "endpoint": "https://pve.example.test:8006", "node": "pve1"},
            "pools": {"web": {"mode": "fixed", "size": 1, "template": "debian-12-ci"}},
        }
    )
    bigger = variant(pve, pools={"web": {"size": 2}})
    infra = InfraConfig(VMs=[VMRecord(Name="lab-web-0", Pool="web", Index=0, ID="101", AZ="pve1")])
    driver = driver_for(Target.for_spec(pve, None))
    added = poolsizes.size_resources(driver, pve, bigger, infra)
    assert [(r.action, r.type) for r in added] == [
        (Action.create, "proxmox_virtual_environment_vm"),
        (Action.create, "proxmox_virtual_environment_file"),  # the new VM's cloud-init ISO
    ]
    assert added[0].name == "lab-web-1"
    infra.VMs.append(VMRecord(Name="lab-web-1", Pool="web", Index=1, ID="102", AZ="pve1"))
    removed = poolsizes.size_resources(driver, bigger, pve, infra)
    assert [(r.action, r.type, r.name) for r in removed] == [
        (Action.destroy, "proxmox_virtual_environment_vm", "lab-web-1")
    ]


def _asg(spec: EnvSpec, desired: int, mx: int = 5) -> EnvSpec:
    return EnvSpec.model_validate(
        {**svc.spec_json(spec), "pools": {"web": {"mode": "asg", "min": 0, "max": mx, "desired": desired}}}
    )


def test_an_asg_set_below_its_instances_counts_those_that_go_and_names_the_candidates(spec):
    ids = ["i-a", "i-b", "i-c"]
    infra = InfraConfig(
        ScalingGroupID={"web": "demo-fixed-web"},
        VMs=[VMRecord(Name=i, Pool="web", Index=-1, ID=i, State=VMState.ready) for i in ids],
    )
    driver = driver_for(_target(spec))
    out = poolsizes.size_resources(driver, _asg(spec, 3), _asg(spec, 1), infra)
    assert [(r.action, r.type, r.name) for r in out] == [
        (Action.destroy, "aws_instance", "demo-fixed-web[-1]"),
        (Action.destroy, "aws_instance", "demo-fixed-web[-2]"),
    ]
    assert "one of i-a, i-b, i-c: the group's termination policy picks which" in out[0].detail
    up = poolsizes.size_resources(driver, _asg(spec, 3), _asg(spec, 4), infra)
    assert [(r.action, r.name) for r in up] == [(Action.create, "demo-fixed-web[+1]")]
    # A pool held stopped stays at 0 whatever the file says: no line.
    held = infra.model_copy(update={"StoppedPools": ["web"]})
    assert poolsizes.size_resources(driver, _asg(spec, 3), _asg(spec, 1), held) == []


def test_an_update_counts_the_vms_a_smaller_size_destroys(url, spec):
    job = _applied(url, _sized(spec, 3), InfraConfig(VMs=_vms("web", 3)))
    # refresh=False: the file against the record only (no cloud here); the refresh that reads the
    # cloud first is tested on the sandboxes (test_<cloud>_drift.py).
    ap = ops.plan_update(_sized(spec, 2), _target(spec), job, refresh=False)
    assert [c.path for c in ap.changes] == ["pools.web.size"]
    assert ap.plan.summary == "Update: 1 cloud change(s). Plan: 0 to add, 1 to change, 1 to destroy."
    data = ap.to_json()
    assert data["counts"] == {"add": 0, "change": 1, "destroy": 1}
    assert [(r["action"], r["type"], r["name"]) for r in data["resources"]] == [
        ("-", "aws_instance", "demo-fixed-web-2")
    ]
    assert data["resources"][0]["detail"].startswith("i-0002: ")
    grow = ops.plan_update(_sized(spec, 4), _target(spec), job, refresh=False)
    assert grow.plan.counts() == {"add": 1, "change": 1, "destroy": 0}


def test_scale_warns_when_the_file_as_last_applied_differs_and_remembers_it_across_scales(url, spec):
    job = _applied(url, _sized(spec, 2), InfraConfig(VMs=_vms("web", 2)))
    up = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3)
    assert up.params["file"] == {"size": 2}
    assert up.json_extra == {"fileDrift": [{"path": "pools.web.size", "file": 2, "scaled": 3}]}
    assert len(up.warnings) == 1
    assert "says pools.web.size 2: set pools.web.size to 3 in the file" in up.warnings[0]
    assert "`vmplane apply` of the unchanged file undoes it" in up.warnings[0]
    assert [r.action for r in up.plan.resources] == [Action.create]
    assert up.plan.summary == "Scale: pool web size 2 -> 3. Plan: 1 to add, 1 to change, 0 to destroy."
    job = _run(url, up)
    # A second scale still compares with the file (2), not with the first scale (3).
    again = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=4)
    assert again.json_extra["fileDrift"] == [{"path": "pools.web.size", "file": 2, "scaled": 4}]
    # Scaling back to the file's size: nothing to warn about.
    back = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=2)
    assert back.warnings == [] and back.json_extra == {"fileDrift": []}
    # The plan of the file sets the size back, and says a scale had changed it.
    ap = ops.plan_update(_sized(spec, 2), _target(spec), job, refresh=False)
    scale_id = job.operation.id
    assert f"`vmplane scale` ({scale_id}) set pool web's sizes; this file sets them back (pools.web.size 3 -> 2)" in (
        " ".join(ap.plan.notes)
    )
    # An update of a file with the scaled size: the file matches again, the next scale compares with it.
    with db.transaction(url) as s:
        svc.begin_operation(s, job.id, "update", {"changes": []}, ["stepCreateVMs"], spec=_sized(spec, 3))
        svc.set_status(s, job.id, JobStatus.succeeded)
        job = svc.view(svc.get_row(s, job.id))
    assert poolsizes.file_sizes(job, "web") == {"size": 3}
    assert poolsizes.scaled_notes(job, _sized(spec, 3)) == []


def test_scale_of_an_asg_names_each_field_the_file_says_otherwise(url, spec):
    job = _applied(url, _asg(spec, 2, mx=3))
    op = ops.plan_scale(job, "web", min_size=None, max_size=5, desired=4)
    assert op.json_extra["fileDrift"] == [
        {"path": "pools.web.desired", "file": 2, "scaled": 4},
        {"path": "pools.web.max", "file": 3, "scaled": 5},
    ]
    assert "pools.web.desired to 4, pools.web.max to 5" in op.warnings[0]


def test_scale_against_a_given_file_compares_with_that_file(url, spec):
    job = _applied(url, _sized(spec, 2), InfraConfig(VMs=_vms("web", 2)))
    job = _run(url, ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3))
    # The user put the scaled size in the file; its apply found nothing to change and recorded nothing.
    edited = _sized(spec, 3)
    assert ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3).warnings != []  # as last applied
    given = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3, file=edited, file_name="env.jsonc")
    assert given.warnings == [] and given.params["file"] == {"size": 3}
    more = ops.plan_scale(job, "web", min_size=None, max_size=None, desired=5, file=edited, file_name="env.jsonc")
    assert more.warnings[0].startswith("env.jsonc says pools.web.size 3: set pools.web.size to 5 in the file")
    with pytest.raises(UsageError, match=r"env\.jsonc is for acme/other, not acme/demo-fixed"):
        ops.plan_scale(
            job,
            "web",
            min_size=None,
            max_size=None,
            desired=3,
            file=variant(edited, name="other"),
            file_name="env.jsonc",
        )
    with pytest.raises(UsageError, match=r"env\.jsonc: pools\.web is not a fixed pool there"):
        ops.plan_scale(job, "web", min_size=None, max_size=None, desired=3, file=_asg(spec, 2), file_name="env.jsonc")


def test_an_asg_its_schedule_holds_at_zero_gets_no_lines(spec):
    hours = {"days": "Mon-Fri", "start": "08:00", "stop": "18:00", "timezone": "UTC"}
    held = EnvSpec.model_validate(
        {
            **svc.spec_json(spec),
            "pools": {"web": {"mode": "asg", "min": 0, "max": 5, "desired": 2, "schedule": hours}},
        }
    )
    bigger = variant(held, pools={"web": {"desired": 3}})
    infra = InfraConfig(ScalingGroupID={"web": "g"})
    driver = driver_for(_target(spec))
    night, day = datetime(2026, 12, 2, 23, 0, tzinfo=UTC), datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert poolsizes.size_resources(driver, held, bigger, infra, now=night) == []
    assert [r.name for r in poolsizes.size_resources(driver, held, bigger, infra, now=day)] == [
        "g[+1]",
        "g[+2]",
        "g[+3]",
    ]
