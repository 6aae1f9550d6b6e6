"""jobs/operations.py: what each vmOp and a changed file mean for an applied environment."""

from __future__ import annotations

import pytest

from vmplane.envspec.models import EnvSpec, LoadBalancer
from vmplane.jobs import operations as ops
from vmplane.jobs import service as svc
from vmplane.jobs.operations import Decision, OperationError
from vmplane.jobs.service import JobConflictError, JobStatus, spec_json
from vmplane.pipeline.plan import provision_steps
from vmplane.state import InfraConfig, VMRecord
from vmplane.store import db
from vmplane.target import Target

from .support import variant

TARGET = Target.for_spec(
    EnvSpec.model_validate(
        {
            "name": "x",
            "org": "o",
            "provider": {"cloud": "aws", "region": "us-east-1"},
            "pools": {"p": {"mode": "fixed", "size": 1}},
        }
    ),
    "http://127.0.0.1:4566",
)


@pytest.fixture
def url(tmp_path):
    return "sqlite:///" + str(tmp_path / "x.db")


def _applied(url, spec, infra=None, status=JobStatus.succeeded):
    with db.transaction(url) as s:
        row = svc.create_job(s, spec, TARGET, provision_steps(spec))
        svc.set_status(s, row.id, status)
        if infra is not None:
            svc.save_infra(s, row.id, infra)
        return svc.view(svc.get_row(s, row.id))


def _asg_spec(spec):
    return EnvSpec.model_validate(
        {**spec_json(spec), "pools": {"web": {"mode": "asg", "min": 1, "max": 3, "desired": 2}}}
    )


def test_scale_checks_sizes_against_the_pool_kind(url, spec):
    fixed = _applied(url, spec)
    op = ops.plan_scale(fixed, "web", min_size=None, max_size=None, desired=3)
    assert op.spec.pools["web"].size == 3 and op.steps == ["stepScalePool", "stepRegisterSpace"]
    with pytest.raises(OperationError, match="pool web is fixed: only --desired"):
        ops.plan_scale(fixed, "web", min_size=1, max_size=None, desired=None)
    with pytest.raises(OperationError, match="no pool 'api'"):
        ops.plan_scale(fixed, "api", min_size=None, max_size=None, desired=1)
    with pytest.raises(OperationError, match="at least one of"):
        ops.plan_scale(fixed, "web", min_size=None, max_size=None, desired=None)


def test_scale_of_an_asg_keeps_min_desired_max_consistent(url, spec):
    job = _applied(url, _asg_spec(spec))
    op = ops.plan_scale(job, "web", min_size=None, max_size=5, desired=4)
    assert (op.spec.pools["web"].min, op.spec.pools["web"].desired, op.spec.pools["web"].max) == (1, 4, 5)
    with pytest.raises(OperationError, match=r"pools.web: .*min <= desired <= max"):
        ops.plan_scale(job, "web", min_size=None, max_size=None, desired=7)


def test_attach_needs_a_block_and_detach_needs_a_load_balancer(url, spec):
    job = _applied(url, spec)
    with pytest.raises(OperationError, match="no loadBalancer block to attach"):
        ops.plan_attach_lb(job, None)
    with pytest.raises(JobConflictError, match="no load balancer attached"):
        ops.plan_detach_lb(job)
    op = ops.plan_attach_lb(job, LoadBalancer(domain="a.example.test"))
    assert op.spec.load_balancer.domain == "a.example.test"
    assert op.steps[:4] == [
        "stepCreateLoadBalancer",
        "stepCreateTargetGroup",
        "stepCreateListener",
        "stepCreateDNSRecord",
    ]


def test_detach_remembers_the_block_for_a_later_attach(url, spec):
    with_lb = variant(spec, loadBalancer={"domain": "a.example.test"})
    job = _applied(url, with_lb, InfraConfig(LoadBalancerID="arn:lb"))
    op = ops.plan_detach_lb(job)
    assert op.spec.load_balancer is None
    assert op.config_updates["detachedLoadBalancer"]["domain"] == "a.example.test"
    with pytest.raises(JobConflictError, match="already has a load balancer"):
        ops.plan_attach_lb(job, None)


def test_operations_wait_for_a_running_job(url, spec):
    job = _applied(url, spec, status=JobStatus.running)
    with pytest.raises(JobConflictError, match="is running"):
        ops.plan_rotate(job, None)


def test_rotate_lists_the_outdated_vms(url, spec):
    infra = InfraConfig(
        LaunchTemplateVersion={"web": 2},
        VMs=[
            VMRecord(Name="a", Pool="web", Index=0, ID="i-1", LaunchTemplateVersion=1),
            VMRecord(Name="b", Pool="web", Index=1, ID="i-2", LaunchTemplateVersion=2),
        ],
    )
    op = ops.plan_rotate(_applied(url, spec, infra), None)
    assert op.plan.summary == "Rotate: 1 VMs to replace."
    assert op.plan.notes == ["a (i-1) v1 -> v2 (one at a time)"]


def test_a_changed_file_is_an_update_unless_something_cannot_change_in_place(url, spec):
    job = _applied(url, spec)
    # refresh=False: the file against the record only (no cloud here); the refresh that reads the
    # cloud first is tested on the sandboxes (test_<cloud>_drift.py).
    ap = ops.plan_update(
        variant(spec, pools={"web": {"image": "debian-12"}}, tags={"a": "b"}), TARGET, job, refresh=False
    )
    assert ap.decision is Decision.update
    assert "stepUpdateTags" in ap.plan.steps
    # Two fields changed in place, no VM launched or terminated.
    assert ap.plan.summary == "Update: 1 cloud, 1 vm change(s). Plan: 0 to add, 2 to change, 0 to destroy."
    assert ap.plan.resources == []
    refused = ops.plan_update(
        variant(spec, network={"cidr": "10.9.0.0/16"}, runtime={"env": {"A": "1"}}), TARGET, job, refresh=False
    )
    assert refused.decision is Decision.refused
    assert [r.split(":")[0] for r in refused.refusals] == ["network.cidr"]
    # Runtime only: pushed through the exec channel, no other step runs.
    runtime = ops.plan_update(variant(spec, runtime={"env": {"A": "1"}}), TARGET, job, refresh=False)
    assert runtime.decision is Decision.update
    assert runtime.plan.steps == ["stepPushRuntime", "stepRegisterSpace"]
    added_lb = ops.plan_update(variant(spec, loadBalancer={"domain": "a.example.test"}), TARGET, job, refresh=False)
    assert added_lb.refusals == ["loadBalancer: use `vmplane lb attach demo-fixed` to attach the load balancer"]
