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
# because `resume` then starts a new workflow and every step is idempotent.
APPLICATION_VERSION = f"vmplane-{vmplane.__version__}"


def launch(settings: Settings) -> None:
    with _lock:
        if _launched.is_set():
            return
        settings.ensure_home()
        from dbos import DBOS

        import vmplane.pipeline.workflows  # noqa: F401 - registers the workflows before launch

        DBOS(
            config={
                "name": "vmplane",
                "system_database_url": settings.dbos_url,
                "application_version": APPLICATION_VERSION,
                "log_level": "WARNING",
                # DBOS.destroy() waits out one poll of this SQLite listener: the 1 s default would add
                # up to a second to every command.
                "notification_listener_polling_interval_sec": 0.05,
            }
        )
        DBOS.launch()
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
