"""Run a job's steps as soon as their inputs allow, not in lockstep waves.

A step starts once everything it needs is met: the steps it needs have done their work (`settle`), or
announced the milestone it needs (`clouds.steps`). A driver's early steps start at once and wait for their inputs
themselves (`wait_inputs`). Whatever starts early records success only after its inputs have ended
(`settle`), so steps complete in dependency order. After a failure nothing new starts; the steps
already running finish, and the first failure in the order the user is shown is raised.

Pure threading: the runner supplies `run(name, hooks)`; a crash mid-graph re-runs the graph, and
steps already recorded as succeeded return at once (their milestones are then met too).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from vmplane.clouds.steps import step_of
from vmplane.errors import VmplaneError


class InputFailedError(VmplaneError):
    """An early step stops where it would need a step that failed or never ran."""


@dataclass(frozen=True)
class StepGraph:
    steps: list[str]  # the order the user is shown; failures are reported in it
    needs: dict[str, list[str]]  # step -> steps or `step:milestone`s, all within `steps`
    early: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "needs": self.needs, "early": sorted(self.early)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> StepGraph:
        return cls(list(doc["steps"]), {k: list(v) for k, v in doc["needs"].items()}, frozenset(doc["early"]))


@dataclass(frozen=True)
class Hooks:
    reached: Callable[[str], None]  # the running step passed a milestone
    wait_inputs: Callable[[], None]  # an early step is about to use what its inputs produce
    # The step's work succeeded and is saved: its dependents may start; returns once its own inputs
    # have ended, so that it is recorded as succeeded after them.
    settle: Callable[[], None]


def execute(graph: StepGraph, run: Callable[[str, Hooks], object]) -> None:
    cond = threading.Condition()
    met: set[str] = set()  # steps whose work is done, and passed milestones
    started: set[str] = set()
    ended: set[str] = set()
    failed: dict[str, BaseException] = {}

    def over(step: str) -> bool:  # ended, or will never start because something failed
        return step in ended or (bool(failed) and step not in started)

    def inputs_over(name: str) -> bool:
        return all(over(step_of(d)) for d in graph.needs[name])

    def wait_inputs(name: str) -> None:
        with cond:
            cond.wait_for(lambda: inputs_over(name))
            missing = [step_of(d) for d in graph.needs[name] if step_of(d) not in met]
        if missing:
            raise InputFailedError(f"stopped before using what {', '.join(missing)} makes: it did not succeed")

    def settle(name: str) -> None:
        with cond:
            met.add(name)  # its work is done and saved: what needs it may start
            cond.notify_all()
            cond.wait_for(lambda: inputs_over(name))

    def reached(name: str, mark: str) -> None:
        with cond:
            met.add(f"{name}:{mark}")
            cond.notify_all()

    def worker(name: str) -> None:
        hooks = Hooks(
            reached=lambda mark: reached(name, mark),
            wait_inputs=lambda: wait_inputs(name),
            settle=lambda: settle(name),
        )
        try:
            run(name, hooks)
        except BaseException as err:  # re-raised below, in step order
            with cond:
                failed[name] = err
        else:
            with cond:
                met.add(name)
        finally:
            with cond:
                ended.add(name)
                cond.notify_all()

    def startable(name: str) -> bool:
        return name not in started and (
            name in graph.early or all(d in met or step_of(d) in met for d in graph.needs[name])
        )

    with ThreadPoolExecutor(max_workers=max(1, len(graph.steps)), thread_name_prefix="vmplane-step") as pool, cond:
        while True:
            if not failed:
                for name in filter(startable, graph.steps):
                    started.add(name)
                    # In a copy of the caller's context: the job's log scope and span follow the step.
                    pool.submit(contextvars.copy_context().run, worker, name)
            if ended == started and (failed or len(started) == len(graph.steps)):
                break
            if ended == started:  # nothing runs and nothing can start: `needs` names a step not in the graph
                raise AssertionError(f"steps that can never start: {sorted(set(graph.steps) - started)}")
            cond.wait()
    for name in graph.steps:
        if name in failed:
            raise failed[name]
