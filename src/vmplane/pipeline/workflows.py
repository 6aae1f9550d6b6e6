"""Durable workflows (DBOS): one checkpointed DBOS step per pipeline step.

A crash anywhere leaves the workflow PENDING in DBOS's system database; the next process that
launches DBOS (`vmplane apply`, `vmplane resume`, a worker) recovers it and continues at the step
that was interrupted. That step runs again, which is safe because every step is idempotent.
"""

from __future__ import annotations

from dbos import DBOS

from vmplane.pipeline import runner


@DBOS.step(retries_allowed=False)
def begin(job_id: str, teardown: bool) -> list[str]:
    return runner.start_job(job_id, teardown=teardown)


@DBOS.step(retries_allowed=False)
def pipeline_step(job_id: str, name: str, teardown: bool) -> str:
    # Transient cloud errors are retried inside the driver with deadlines; what reaches here is final.
    return runner.run_step(job_id, name, teardown=teardown)


@DBOS.step(retries_allowed=False)
def finish(job_id: str, teardown: bool, error: str | None) -> str:
    return runner.finish_job(job_id, teardown=teardown, error=error)


def _run(job_id: str, teardown: bool) -> str:
    error: str | None = None
    for name in begin(job_id, teardown):
        try:
            pipeline_step(job_id, name, teardown)
        except Exception as err:
            error = str(err)
            break
    return finish(job_id, teardown, error)


@DBOS.workflow()
def provision_workflow(job_id: str) -> str:
    return _run(job_id, teardown=False)


@DBOS.workflow()
def teardown_workflow(job_id: str) -> str:
    return _run(job_id, teardown=True)
