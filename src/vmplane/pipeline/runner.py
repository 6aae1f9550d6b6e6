"""Run one named step of a job: read state, call the cloud driver, write state.

Independent of DBOS so it can be tested directly; `workflows.py` wraps each call in a durable step.
A step already recorded as succeeded is skipped, so resuming a job continues where it stopped; every
step is idempotent anyway, because a crash can land between a cloud call and its checkpoint.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from vmplane.bootstrap import vmconfig
from vmplane.clouds.base import API_CALLS, CloudDriver, Context, Tagger
from vmplane.clouds.registry import driver_for
from vmplane.cost.history import record_finish
from vmplane.observe import logs, metrics, tracing
from vmplane.observe.scope import scoped
from vmplane.pipeline.plan import step_graph
from vmplane.pipeline.rows import db_url as _db_url
from vmplane.pipeline.rows import write as _write
from vmplane.pipeline.runtime_push import RuntimePushError
from vmplane.pipeline.step_work import StepFailedError
from vmplane.pipeline.step_work import validate as _validate
from vmplane.pipeline.stepgraph import Hooks, StepGraph, execute
from vmplane.pipeline.steps import BY_NAME, TABLE, early_steps, step_dependencies, table_for
from vmplane.store import job_rows as jobs
from vmplane.store.db import transaction
from vmplane.store.job_records import JobStatus, JobView, OperationStatus, Phase, StepStatus
from vmplane.target import Target

_log = logs.get(__name__)
StepFn = Callable[[CloudDriver, Context, JobView], None]
MAX_LOG_LINES = 50


__all__ = ["StepFailedError", "_validate", "_write"]  # re-exported (tests reach them here)

# What each step runs, from its one declaration (`pipeline.steps`); a driver's own steps run from its table.
STEPS: dict[str, StepFn] = {s.name: s.run for s in TABLE}


def run_step(job_id: str, name: str, phase: Phase = Phase.provision, hooks: Hooks | None = None) -> str:
    """Run step `name` of job `job_id`; returns its final status. Raises StepFailedError on failure.
    `hooks` connect it to the steps running beside it (`pipeline.stepgraph`)."""
    url = _db_url()
    with transaction(url) as s:
        job = jobs.view(jobs.get_row(s, job_id))
    if any(r.name == name and r.status is StepStatus.succeeded for r in job.steps_of(phase)):
        return StepStatus.succeeded.value
    cloud = str(job.config["target"]["cloud"])
    attrs = {"vmplane.job": job_id, "vmplane.step": name, "vmplane.phase": phase.value, "cloud": cloud}
    with scoped(job=job_id, phase=phase.value, step=name, org=job.org, cloud=cloud), tracing.span(name, attrs):
        _log.info("%s started", name)
        started = time.monotonic()
        error, message = _execute(url, job, name, phase, hooks)
        seconds = time.monotonic() - started
        metrics.observe_step(name, cloud, phase.value, "failed" if error else "succeeded", seconds)
        if error is not None:
            _log.warning("%s failed after %.2fs: %s", name, seconds, message)
            raise StepFailedError(f"{name}: {message}") from error  # inside the span: it records the error
        _log.info("%s succeeded in %.2fs", name, seconds)
    return StepStatus.succeeded.value


def _execute(
    url: str, job: JobView, name: str, phase: Phase, hooks: Hooks | None
) -> tuple[BaseException | None, str | None]:
    """Run the step's function and record its end on the job row; returns its error and the message."""
    job_id = job.id
    _write(url, lambda s: jobs.update_step(s, job_id, name, phase=phase, status=StepStatus.running))

    log: list[str] = []
    infra = job.infra
    base = infra.model_dump(mode="json")

    def save() -> None:
        nonlocal base
        snapshot = infra.model_dump(mode="json")
        _write(url, lambda s: jobs.save_infra(s, job_id, infra, base))
        base = snapshot

    def note(msg: str) -> None:
        _log.info("%s", msg)  # the step log's lines, in the process's log too
        log.append(msg)
        del log[:-MAX_LOG_LINES]

    def reached(milestone: str) -> None:
        save()  # what a dependent reads when it starts must be in the job row first
        if hooks is not None:
            note(f"{milestone}: the steps that need it may start")
            hooks.reached(milestone)

    ctx = Context(
        job_id=job_id,
        spec=job.spec,
        infra=infra,
        tagger=Tagger.for_spec(job.spec, job_id),
        save=save,
        log=note,
        reached=reached,
        wait_inputs=hooks.wait_inputs if hooks is not None else lambda: None,
        vmconfig=vmconfig.recorded_digests(job.config),
    )
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    error: BaseException | None = None
    try:
        driver = driver_for(job.target)
        _run_of(driver, name)(driver, ctx, job)
        if hooks is not None:
            save()  # its dependents may start now, and read the job row when they do
            done = time.monotonic()
            hooks.settle()  # returns once what it needs has completed: it is recorded after them
            if (waited := time.monotonic() - done) >= 0.1:
                note(f"work done; {waited:.1f}s more until the steps it needs had completed")
    except Exception as err:
        error = err
    finally:
        API_CALLS.reset(token)
    message = _describe(error) if error else None

    def finish(s: Session) -> None:
        jobs.save_infra(s, job_id, infra, base)
        status = StepStatus.failed if error else StepStatus.succeeded
        jobs.update_step(s, job_id, name, phase=phase, status=status, error=message, api_calls=dict(tally), log=log)
        if ctx.notes and phase is Phase.operation:
            jobs.add_operation_notes(s, job_id, ctx.notes)

    _write(url, finish)
    return error, message


def _run_of(driver: CloudDriver | None, name: str) -> StepFn:
    """What step `name` runs: the driver's own declaration where it differs from the table's, else `STEPS`."""
    declared = table_for(driver).get(name) if driver is not None else None
    base = BY_NAME.get(name)
    if declared is not None and (base is None or declared.run is not base.run):
        return declared.run
    return STEPS[name]


def run_steps(job_id: str, graph: StepGraph, phase: Phase) -> None:
    """Run the job's steps, each as soon as what it needs is met; raise the first failure in step order."""
    execute(graph, lambda name, hooks: run_step(job_id, name, phase, hooks))


def _describe(err: BaseException) -> str:
    from vmplane.clouds.errors import CloudError

    if isinstance(err, CloudError | StepFailedError | RuntimePushError):
        return str(err)
    return f"{type(err).__name__}: {err}"


def start_job(job_id: str, phase: Phase) -> StepGraph:
    """Mark the job running and return its steps with what each needs before it starts."""

    def begin(s: Session) -> StepGraph:
        row = jobs.get_row(s, job_id)
        if phase is Phase.operation:
            jobs.set_operation_status(s, job_id, OperationStatus.running)
        if phase is not Phase.teardown:
            jobs.set_status(s, job_id, JobStatus.running)
        driver = driver_for(Target.model_validate(row.config["target"]))
        names = jobs.step_names(row, phase)
        return StepGraph(names, step_graph(names, step_dependencies(driver)), early_steps(driver) & set(names))

    return _write(_db_url(), begin)


def finish_job(job_id: str, phase: Phase, error: str | None) -> str:
    if phase is Phase.teardown:
        status = JobStatus.delete_failed if error else JobStatus.deleted
    else:
        status = JobStatus.failed if error else JobStatus.succeeded

    def finish(s: Session) -> None:
        if phase is Phase.operation:
            op_status = OperationStatus.failed if error else OperationStatus.succeeded
            jobs.set_operation_status(s, job_id, op_status, error=error)
        row = jobs.set_status(s, job_id, status, error)
        if error is None:  # the billed shape changed: one entry in the job's cost history
            ledger = record_finish(row.config, row.steps or [], phase.value, row.created_at, datetime.now(UTC))
            row.config = {**row.config, "costLedger": ledger}

    _write(_db_url(), finish)
    return status.value
