"""The step executor: milestones let dependents start early, early steps wait for their inputs
themselves, completion stays in dependency order, and a failure stops what has not started."""

from __future__ import annotations

import threading

import pytest

from vmplane.pipeline.stepgraph import Hooks, InputFailedError, StepGraph, execute

WAIT = 5.0  # a step that never gets what it waits for fails the test instead of hanging it


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.lock = threading.Lock()

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def before(self, a: str, b: str) -> bool:
        return self.events.index(a) < self.events.index(b)


def test_a_milestone_starts_its_dependent_before_the_step_ends_and_completion_keeps_the_order():
    rec = Recorder()
    b_started = threading.Event()

    def run(name: str, hooks: Hooks) -> None:
        rec.add(f"{name} start")
        if name == "net":
            hooks.reached("public")
            # ends only once its dependent has started: impossible if "lb" waited for the whole step
            assert b_started.wait(WAIT), "lb did not start at the milestone"
        if name == "lb":
            b_started.set()
        rec.add(f"{name} work done")
        hooks.settle()
        rec.add(f"{name} end")

    execute(StepGraph(["net", "lb"], {"net": [], "lb": ["net:public"]}), run)
    assert rec.before("lb start", "net end")
    assert rec.before("net end", "lb end"), rec.events  # lb's work may finish first; its completion may not


def test_a_step_without_milestones_is_met_when_it_succeeds():
    rec = Recorder()

    def run(name: str, hooks: Hooks) -> None:
        rec.add(f"{name} start")
        hooks.settle()
        rec.add(f"{name} end")

    execute(StepGraph(["a", "b", "c"], {"a": [], "b": ["a:public"], "c": ["b"]}), run)
    assert rec.events == ["a start", "a end", "b start", "b end", "c start", "c end"]


def test_an_early_step_runs_its_first_part_at_once_and_the_rest_after_its_inputs():
    rec = Recorder()
    first_part = threading.Event()

    def run(name: str, hooks: Hooks) -> None:
        rec.add(f"{name} start")
        if name == "vms":
            assert first_part.wait(WAIT), "the early step did not start at once"
        if name == "net":
            rec.add("net first part")
            first_part.set()
            hooks.wait_inputs()
            rec.add("net rest")
        hooks.settle()
        rec.add(f"{name} end")

    execute(StepGraph(["vms", "net"], {"vms": [], "net": ["vms"]}, early=frozenset({"net"})), run)
    assert rec.before("net first part", "vms end")
    assert rec.before("vms end", "net rest")


def test_an_early_step_stops_when_an_input_fails_or_never_runs():
    rec = Recorder()

    def run(name: str, hooks: Hooks) -> None:
        rec.add(name)
        if name == "vms":
            raise RuntimeError("terminate failed")
        if name == "net":
            hooks.wait_inputs()  # "vms" failed and "sg" never starts: must not wait forever
            rec.add("net rest")

    graph = StepGraph(["vms", "sg", "net"], {"vms": [], "sg": ["vms"], "net": ["sg"]}, early=frozenset({"net"}))
    with pytest.raises(RuntimeError, match="terminate failed"):
        execute(graph, run)
    assert "sg" not in rec.events and "net rest" not in rec.events


def test_an_input_failed_error_names_the_step():
    def run(name: str, hooks: Hooks) -> None:
        if name == "a":
            raise RuntimeError("boom")
        hooks.wait_inputs()

    errors: list[BaseException] = []

    def capture(name: str, hooks: Hooks) -> None:
        try:
            run(name, hooks)
        except InputFailedError as err:
            errors.append(err)
            raise

    with pytest.raises(RuntimeError, match="boom"):
        execute(StepGraph(["a", "b"], {"a": [], "b": ["a"]}, early=frozenset({"b"})), capture)
    assert [str(e) for e in errors] == ["stopped before using what a makes: it did not succeed"]


def test_after_a_failure_nothing_new_starts_and_the_first_failure_in_step_order_is_raised():
    rec = Recorder()
    both_running = threading.Barrier(2, timeout=WAIT)

    def run(name: str, hooks: Hooks) -> None:
        rec.add(name)
        if name in ("a", "b"):
            both_running.wait()  # side by side, so both failures happen
            raise RuntimeError(f"{name} failed")

    graph = StepGraph(["a", "b", "c"], {"a": [], "b": [], "c": ["b"]})
    with pytest.raises(RuntimeError, match="a failed"):
        execute(graph, run)
    assert sorted(rec.events) == ["a", "b"]


def test_a_dependent_starts_when_its_input_has_done_its_work_and_completes_after_it():
    """lb settles until net ends; dns (needing lb) need not wait for that, only complete after lb."""
    rec = Recorder()
    dns_started = threading.Event()

    def run(name: str, hooks: Hooks) -> None:
        rec.add(f"{name} start")
        if name == "net":
            hooks.reached("public")
            assert dns_started.wait(WAIT), "dns waited for lb to complete, not for its work"
        if name == "dns":
            dns_started.set()
        hooks.settle()
        rec.add(f"{name} end")

    execute(StepGraph(["net", "lb", "dns"], {"net": [], "lb": ["net:public"], "dns": ["lb"]}), run)
    assert rec.before("dns start", "net end")
    assert rec.events.index("net end") < rec.events.index("lb end") < rec.events.index("dns end")


def test_the_graph_survives_a_round_trip_through_json():
    graph = StepGraph(["a", "b"], {"a": [], "b": ["a:public"]}, early=frozenset({"b"}))
    assert StepGraph.from_json(graph.to_json()) == graph
