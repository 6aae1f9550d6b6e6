"""Start, enqueue or re-attach to a job's durable workflow, and wait for it.

One workflow id per (job, phase or operation, attempt): a queued or running workflow is re-attached
to, anything else (new, failed, interrupted under another vmplane version) starts a new attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any

from vmplane.settings import Settings
from vmplane.store import job_rows as jobs
from vmplane.store.db import transaction
from vmplane.store.job_records import JobView, Phase

ACTIVE_WORKFLOW = {"PENDING", "ENQUEUED"}


Progress = Callable[[JobView], None]


def workflow_kind(job: JobView, phase: Phase) -> str:
    """The attempt counter's key: one per phase, and one per operation."""
    if phase is Phase.operation:
        assert job.operation is not None
        return job.operation.id
    return phase.value


def _workflow_for(
    settings: Settings, job_id: str, phase: Phase, status_of: Callable[[str], str | None]
) -> tuple[str, bool]:
    """The job's workflow id for `phase`: the current one while it is queued or running (True), else a
    new attempt, recorded (False): nothing is in flight (new, failed, or interrupted under another
    vmplane version)."""
    from vmplane.pipeline import engine

    with transaction(settings.db_url) as s:
        row = jobs.get_row(s, job_id)
        kind = workflow_kind(jobs.view(row), phase)
        attempt = jobs.current_attempt(row, kind)
    if attempt and status_of(engine.workflow_id(job_id, kind, attempt)) in ACTIVE_WORKFLOW:
        return engine.workflow_id(job_id, kind, attempt), True
    with transaction(settings.db_url) as s:
        attempt = jobs.next_workflow_attempt(s, job_id, kind)
    return engine.workflow_id(job_id, kind, attempt), False


def start(settings: Settings, job_id: str, phase: Phase) -> tuple[Any, str]:
    """Start (or re-attach to) the job's workflow for `phase` in this process; returns (handle, id)."""
    from vmplane.pipeline import engine

    engine.launch(settings)
    wid, _ = _workflow_for(settings, job_id, phase, engine.status_of)
    return engine.start(job_id, phase.value, wid), wid


def enqueue(settings: Settings, job_id: str, phase: Phase) -> str:
    """Hand the job's workflow to the workers (DBOS queue) without running it here; returns its id."""
    from vmplane.pipeline import engine

    wid, active = _workflow_for(settings, job_id, phase, lambda w: engine.client_status(settings, w))
    if not active:
        engine.enqueue(settings, job_id, phase.value, wid)
    return wid


def run(
    settings: Settings, job_id: str, *, phase: Phase, on_progress: Progress | None = None, poll_interval: float = 0.1
) -> JobView:
    """Run (or re-attach to) the job's workflow for `phase` in this process and wait for it to end."""
    from vmplane.pipeline import engine

    handle, wid = start(settings, job_id, phase)
    # A workflow this process runs ends as a Future (DBOS records its outcome first): waiting on it sees the
    # end at once, and each poll is then only the job's row. Any other handle: ask DBOS each poll.
    future: Future[Any] | None = getattr(handle, "future", None)
    last_version = -1
    while True:
        done = future.done() if future is not None else engine.status_of(wid) not in ACTIVE_WORKFLOW
        with transaction(settings.db_url) as s:
            job = jobs.view(jobs.get_row(s, job_id))
        if on_progress and job.version != last_version:
            last_version = job.version
            on_progress(job)
        if done:
            handle.get_result()
            break
        if future is not None:
            wait([future], timeout=poll_interval)
        else:
            time.sleep(poll_interval)
    with transaction(settings.db_url) as s:
        return jobs.view(jobs.get_row(s, job_id))


def finish_recovered() -> list[str]:
    """Let workflows recovered at launch (interrupted by an earlier crash) run to their end."""
    from dbos import DBOS

    from vmplane.pipeline import engine

    others = engine.other_active_workflows()
    for wid in others:
        DBOS.retrieve_workflow(wid).get_result()
    return others
