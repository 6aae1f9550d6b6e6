"""Durable workflows (DBOS): one checkpointed DBOS step per pipeline step.

A crash anywhere leaves the workflow PENDING in DBOS's system database; the next process that
launches DBOS (`vmplane apply`, `vmplane resume`, a worker) recovers it and continues at the step
that was interrupted. That step runs again, which is safe because every step is idempotent.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from vmplane.pipeline import job_scope, runner
from vmplane.pipeline.stepgraph import StepGraph
from vmplane.store.job_records import Phase


@DBOS.step(retries_allowed=False)
def begin(job_id: str, phase: str) -> dict[str, Any]:
    return runner.start_job(job_id, Phase(phase)).to_json()


@DBOS.step(retries_allowed=False)
def pipeline_steps(job_id: str, graph: dict[str, Any], phase: str) -> None:
    # One checkpoint for the phase's steps, which start as their inputs allow (pipeline.stepgraph). A
    # crash re-runs it: steps recorded as succeeded (in the job row) are skipped, the others reconcile
    # (every step is idempotent). Transient cloud errors are retried inside the driver with deadlines;
    # what reaches here is final.
    runner.run_steps(job_id, StepGraph.from_json(graph), Phase(phase))


@DBOS.step(retries_allowed=False)
def finish(job_id: str, phase: str, error: str | None) -> str:
    return runner.finish_job(job_id, Phase(phase), error)


def _run(job_id: str, phase: Phase) -> str:
    # The job's span and log scope wrap the phase's DBOS steps, which run in this thread; a recovered
    # workflow replays the checkpointed ones without running them and gets a span for what is left.
    with job_scope.job_phase(job_id, phase.value) as ended:
        error: str | None = None
        try:
            pipeline_steps(job_id, begin(job_id, phase.value), phase.value)
        except Exception as err:
            error = str(err)
        return ended(finish(job_id, phase.value, error))


@DBOS.workflow()
def provision_workflow(job_id: str) -> str:
    return _run(job_id, Phase.provision)


@DBOS.workflow()
def teardown_workflow(job_id: str) -> str:
    return _run(job_id, Phase.teardown)


@DBOS.workflow()
def operation_workflow(job_id: str) -> str:
    return _run(job_id, Phase.operation)
