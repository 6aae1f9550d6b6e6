"""pipeline/runner.run_steps on a real job row (SQLite): what a step that starts early reads, what the
job row ends with when steps run side by side, and the order they are recorded in. The cloud is replaced
by step functions that only touch the record, so the test is about the runner, not a driver."""

from __future__ import annotations

import threading
import time

import pytest

from vmplane.jobs import service as svc
from vmplane.pipeline import runner
from vmplane.pipeline.stepgraph import StepGraph
from vmplane.store import db
from vmplane.store.job_records import Phase, StepStatus
from vmplane.target import Target

STEPS = ["stepValidate", "stepCreateNetwork", "stepCreateLoadBalancer"]


@pytest.fixture
def url(tmp_path, monkeypatch):
    url = "sqlite:///" + str(tmp_path / "x.db")
    monkeypatch.setattr(runner, "_db_url", lambda: url)
    monkeypatch.setattr(runner, "driver_for", lambda _target: None)
    yield url
    with db.transaction(url) as session:
        session.get_bind().dispose()


def test_a_step_started_at_a_milestone_reads_what_its_inputs_set_and_completes_after_them(url, spec, monkeypatch):
    with db.transaction(url) as s:
        job_id = svc.create_job(s, spec, Target.for_spec(spec, "http://127.0.0.1:1"), STEPS).id
    lb_started = threading.Event()
    seen: dict[str, object] = {}
    slow = threading.local()
    write = runner._write

    def slow_write(*args, **kwargs):  # validate's writes land late: a dependent must still see them
        if getattr(slow, "on", False):
            time.sleep(0.3)
        return write(*args, **kwargs)

    monkeypatch.setattr(runner, "_write", slow_write)

    def validate(_d, ctx, _j):
        slow.on = True
        ctx.infra.Region = "r-1"  # no ctx.save(): the runner saves it before anything that needs it starts

    def network(_d, ctx, _j):
        seen["network saw region"] = ctx.infra.Region
        ctx.infra.NetworkID = "vpc-1"
        ctx.reached("public")
        assert lb_started.wait(5), "the LB step did not start at the milestone"
        time.sleep(0.2)  # still working while the LB step has finished its own work
        ctx.infra.VMSubnetIDs = ["subnet-1"]

    def load_balancer(_d, ctx, _j):
        seen.update(region=ctx.infra.Region, network=ctx.infra.NetworkID, subnets=list(ctx.infra.VMSubnetIDs))
        ctx.infra.LoadBalancerID = "lb-1"
        lb_started.set()

    monkeypatch.setitem(runner.STEPS, "stepValidate", validate)
    monkeypatch.setitem(runner.STEPS, "stepCreateNetwork", network)
    monkeypatch.setitem(runner.STEPS, "stepCreateLoadBalancer", load_balancer)
    graph = StepGraph(
        STEPS,
        {
            "stepValidate": [],
            "stepCreateNetwork": ["stepValidate"],
            "stepCreateLoadBalancer": ["stepCreateNetwork:public"],
        },
    )
    runner.run_steps(job_id, graph, Phase.provision)

    # What an input set is in the row before its dependents start; at a milestone, what was set by then.
    assert seen == {"network saw region": "r-1", "region": "r-1", "network": "vpc-1", "subnets": []}
    with db.transaction(url) as s:
        job = svc.view(svc.get_row(s, job_id))
    infra = job.infra
    # Both steps' writes survive: each saved only the fields it changed.
    assert (infra.Region, infra.NetworkID, infra.VMSubnetIDs, infra.LoadBalancerID) == (
        "r-1",
        "vpc-1",
        ["subnet-1"],
        "lb-1",
    )
    steps = {r.name: r for r in job.steps}
    assert all(r.status is StepStatus.succeeded for r in steps.values())
    net, lb = steps["stepCreateNetwork"], steps["stepCreateLoadBalancer"]
    assert lb.started_at < net.finished_at <= lb.finished_at  # started early, recorded after its input
    assert any("more until the steps it needs had completed" in line for line in lb.log), lb.log
    assert any(line.startswith("public:") for line in net.log), net.log


def test_a_failed_input_stops_its_early_dependent_and_the_first_failure_is_raised(url, spec, monkeypatch):
    with db.transaction(url) as s:
        job_id = svc.create_job(s, spec, Target.for_spec(spec, "http://127.0.0.1:1"), STEPS).id
    touched: list[str] = []

    def network(_d, ctx, _j):
        raise RuntimeError("network refused")

    def load_balancer(_d, ctx, _j):  # an early step: its first part needs nothing
        touched.append("first part")
        ctx.wait_inputs()
        touched.append("rest")

    monkeypatch.setitem(runner.STEPS, "stepValidate", lambda _d, _c, _j: None)
    monkeypatch.setitem(runner.STEPS, "stepCreateNetwork", network)
    monkeypatch.setitem(runner.STEPS, "stepCreateLoadBalancer", load_balancer)
    graph = StepGraph(
        STEPS,
        {"stepValidate": [], "stepCreateNetwork": ["stepValidate"], "stepCreateLoadBalancer": ["stepCreateNetwork"]},
        early=frozenset({"stepCreateLoadBalancer"}),
    )
    with pytest.raises(runner.StepFailedError, match="stepCreateNetwork: RuntimeError: network refused"):
        runner.run_steps(job_id, graph, Phase.provision)
    assert touched == ["first part"]
    with db.transaction(url) as s:
        steps = {r.name: r for r in svc.view(svc.get_row(s, job_id)).steps}
    assert steps["stepCreateNetwork"].status is StepStatus.failed
    assert steps["stepCreateLoadBalancer"].status is StepStatus.failed
    assert "stepCreateNetwork" in (steps["stepCreateLoadBalancer"].error or "")
