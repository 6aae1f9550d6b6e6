"""The store's view, read at scrape time: jobs by status, worker heartbeats, the job queue's depth.

Read from vmplane's database and DBOS's system tables on every scrape, never counted in memory, so any
process (the API, a worker) reports the same numbers. Only aggregates: no org, environment or job id.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from vmplane.observe import logs, metrics
from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.store.job_records import JobStatus
from vmplane.store.models import JobRow, WorkerRow

_log = logs.get(__name__)


class StoreCollector(Collector):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def describe(self) -> list[Any]:
        return []  # no read of the store when registered

    def collect(self) -> Iterator[Any]:
        # A family that cannot be read is left out of this scrape (and logged), the others still answer.
        for read in (self._jobs, self._workers, self._queue):
            try:
                yield read()
            except Exception as err:
                _log.warning("metrics: %s unavailable: %s", read.__name__.strip("_"), type(err).__name__)

    def _jobs(self) -> GaugeMetricFamily:
        fam = GaugeMetricFamily("vmplane_jobs", "Jobs in vmplane's database by status (all orgs).", labels=["status"])
        with transaction(self.settings.db_url) as s:
            counts = dict(s.execute(select(JobRow.status, func.count()).group_by(JobRow.status)).all())
        for status in JobStatus:
            fam.add_metric([status.value], float(counts.get(status.value, 0)))
        return fam

    def _workers(self) -> GaugeMetricFamily:
        fam = GaugeMetricFamily(
            "vmplane_worker_last_heartbeat_seconds",
            "Unix time of each live `vmplane worker`'s last heartbeat (its row in the workers table).",
            labels=["worker"],
        )
        with transaction(self.settings.db_url) as s:
            for w in s.scalars(select(WorkerRow)):
                seen = w.last_seen if w.last_seen.tzinfo else w.last_seen.replace(tzinfo=UTC)  # SQLite: naive UTC
                fam.add_metric([w.executor_id], seen.timestamp())
        return fam

    def _queue(self) -> GaugeMetricFamily:
        from vmplane.pipeline import engine

        client = engine._client(self.settings)
        queued = client.list_queued_workflows(
            queue_name=engine.QUEUE_NAME, status="ENQUEUED", load_input=False, load_output=False
        )
        fam = GaugeMetricFamily("vmplane_queue_depth", "Jobs enqueued for a worker and not yet started.")
        fam.add_metric([], float(len(queued)))
        return fam


_collector: list[StoreCollector] = []  # at most one: two would answer with the same families twice


def install(settings: Settings) -> None:
    """Point the process's registry at this store; the last app created wins (a process serves one store,
    tests create several in turn)."""
    if _collector:
        _collector[0].settings = settings
    else:
        _collector.append(StoreCollector(settings))
        metrics.REGISTRY.register(_collector[0])
