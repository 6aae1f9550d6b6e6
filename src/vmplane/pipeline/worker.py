"""`vmplane worker`: runs queued jobs, and takes over the jobs of workers that died.

Each worker is a DBOS executor with its own id, and keeps a heartbeat row in vmplane's database. A
worker whose heartbeat is older than `dead_after` is dead: the first live worker to delete its row
(one conditional DELETE, so exactly one wins) recovers the dead executor's pending workflows, which
resume at the interrupted step. Steps are idempotent, so the step that was running runs again safely.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select

from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.store.models import WorkerRow


def new_executor_id() -> str:
    return f"worker-{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


def _beat(settings: Settings, executor_id: str) -> None:
    now = datetime.now(UTC)
    with transaction(settings.db_url) as s:
        row = s.get(WorkerRow, executor_id)
        if row is None:
            s.add(WorkerRow(executor_id=executor_id, host=socket.gethostname(), pid=os.getpid(), last_seen=now))
        else:
            row.last_seen = now


def claim_dead(settings: Settings, me: str, dead_after: float) -> list[str]:
    """Executor ids of dead workers that this worker now owns (their rows are gone: nobody else will)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=dead_after)
    claimed = []
    with transaction(settings.db_url) as s:
        dead = [
            w for w in s.scalars(select(WorkerRow).where(WorkerRow.executor_id != me)) if _aware(w.last_seen) < cutoff
        ]
    for w in dead:
        with transaction(settings.db_url) as s:
            gone = s.execute(
                delete(WorkerRow).where(WorkerRow.executor_id == w.executor_id, WorkerRow.last_seen == w.last_seen)
            )
            if gone.rowcount == 1:  # type: ignore[attr-defined]
                claimed.append(w.executor_id)
    return claimed


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def run(settings: Settings, *, heartbeat: float = 2.0, dead_after: float = 15.0, stop: threading.Event) -> None:
    from dbos import DBOS

    from vmplane.pipeline import engine

    executor_id = os.environ.get("DBOS__VMID") or new_executor_id()
    engine.launch(settings, executor_id=executor_id)  # also recovers this id's own pending workflows
    print(f"vmplane worker {executor_id} running jobs from queue {engine.QUEUE_NAME}", flush=True)
    try:
        while not stop.is_set():
            _beat(settings, executor_id)
            for dead in claim_dead(settings, executor_id, dead_after):
                handles = DBOS._recover_pending_workflows([dead])
                print(f"took over {len(handles)} workflow(s) of dead worker {dead}", flush=True)
            stop.wait(heartbeat)
    finally:
        with transaction(settings.db_url) as s:
            s.execute(delete(WorkerRow).where(WorkerRow.executor_id == executor_id))
        engine.shutdown()
