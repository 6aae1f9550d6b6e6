"""Start DBOS in this process and start or find a job's workflow.

Only commands that run cloud work launch DBOS (apply, destroy, resume, worker): launching recovers
every interrupted workflow of this executor, which a read-only command like `status` must not do.
"""

from __future__ import annotations

import threading
from typing import Any

import vmplane
from vmplane.settings import Settings

_launched = threading.Event()
_lock = threading.Lock()

# Workflows of another vmplane version are not recovered by this one; the job can still be resumed,
# because `resume` then starts a new workflow and every step is idempotent. Bump the version when a
# workflow's recorded steps change shape (0.2.0: one checkpoint per phase, no longer one per wave).
APPLICATION_VERSION = f"vmplane-{vmplane.__version__}"


QUEUE_NAME = "vmplane-jobs"
WORKFLOW_NAMES = {
    "provision": "provision_workflow",
    "teardown": "teardown_workflow",
    "operation": "operation_workflow",
}
_clients: dict[str, Any] = {}


def launch(settings: Settings, executor_id: str | None = None) -> None:
    with _lock:
        if _launched.is_set():
            return
        settings.ensure_home()
        from dbos import DBOS

        import vmplane.pipeline.workflows  # noqa: F401 - registers the workflows before launch
        from vmplane.observe import tracing

        tracing.setup()  # vmplane's own spans, when OTEL_EXPORTER_OTLP_ENDPOINT is set
        # No "enable_otlp" below: with it DBOS would trace its workflows and steps and install a global
        # tracer provider of its own; without it DBOS creates no span at all. vmplane's spans (observe.tracing)
        # use a provider of their own, so the two cannot collide if DBOS tracing is ever turned on.
        DBOS(
            config={
                "name": "vmplane",
                "system_database_url": settings.dbos_url,
                "application_version": APPLICATION_VERSION,
                "log_level": "WARNING",
                # DBOS.destroy() waits out one poll of this SQLite listener: the 1 s default would add
                # up to a second to every command.
                "notification_listener_polling_interval_sec": 0.05,
                **({"executor_id": executor_id} if executor_id else {}),
            }
        )
        DBOS.launch()
        # Jobs the API enqueues (worker mode); every launched process (worker, serve) dequeues from it.
        DBOS.register_queue(QUEUE_NAME, worker_concurrency=settings.worker_jobs, polling_interval_sec=0.2)
        _launched.set()


def shutdown() -> None:
    with _lock:
        if _launched.is_set():
            from dbos import DBOS

            DBOS.destroy(workflow_completion_timeout_sec=0)
            _launched.clear()


def workflow_id(job_id: str, kind: str, attempt: int) -> str:
    return f"{job_id}:{kind}:{attempt}"


def start(job_id: str, phase: str, wid: str) -> Any:
    """Start (or, for an id that exists, attach to) the job's workflow for `phase`; returns a DBOS handle."""
    from dbos import DBOS, SetWorkflowID

    from vmplane.pipeline import workflows

    wf = {
        "provision": workflows.provision_workflow,
        "teardown": workflows.teardown_workflow,
        "operation": workflows.operation_workflow,
    }[phase]
    with SetWorkflowID(wid):
        return DBOS.start_workflow(wf, job_id)


def status_of(wid: str) -> str | None:
    from dbos import DBOS

    st = DBOS.get_workflow_status(wid)
    return None if st is None else str(st.status)


def other_active_workflows() -> list[str]:
    """Workflows recovered at launch (interrupted earlier) that this process now runs."""
    from dbos import DBOS

    active = DBOS.list_workflows(status=["PENDING", "ENQUEUED"])
    return [w.workflow_id for w in active]


def _client(settings: Settings) -> Any:
    """A DBOS client: enqueues and reads workflows without running any (the API in worker mode)."""
    from dbos import DBOSClient
    from dbos.cli.migration import run_dbos_database_migrations

    with _lock:
        if settings.dbos_url not in _clients:
            # What `dbos migrate` does: an API that only enqueues may start before any worker has
            # created DBOS's tables. Idempotent.
            run_dbos_database_migrations(settings.dbos_url)
            _clients[settings.dbos_url] = DBOSClient(system_database_url=settings.dbos_url)
        return _clients[settings.dbos_url]


def enqueue(settings: Settings, job_id: str, phase: str, wid: str) -> None:
    """Put the job's workflow on the job queue for a worker; the id makes a repeat a no-op."""
    _client(settings).enqueue(
        {
            "queue_name": QUEUE_NAME,
            "workflow_name": WORKFLOW_NAMES[phase],
            "workflow_id": wid,
            "app_version": APPLICATION_VERSION,
        },
        job_id,
    )


def client_status(settings: Settings, wid: str) -> str | None:
    found = _client(settings).list_workflows(workflow_ids=[wid])
    return str(found[0].status) if found else None
