"""The process's metrics, in a registry of its own (never prometheus-client's global default).

No label carries an org, an environment, a job id or a user's value: only vmplane's own step names, the
cloud, the phase, an API's service and operation names, outcomes and worker ids. Store-backed gauges (jobs
by status, workers, queue depth) are read at scrape time by a collector the caller adds
(`pipeline.job_gauges`), so they are right across processes.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

STEP_DURATION = Histogram(
    "vmplane_step_duration_seconds",
    "Wall time of one pipeline step, from its start to its recorded end.",
    ("step", "cloud", "phase", "outcome"),
    # Steps take from milliseconds (sandbox) to many minutes (a load balancer, a bootstrap).
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    registry=REGISTRY,
)
CLOUD_CALLS = Counter(
    "vmplane_cloud_api_calls",
    "Cloud API requests (attempts) by outcome: ok, throttled (refused for rate, retried or not), retried "
    "(a transient failure that was retried), failed (an error that was not retried).",
    ("cloud", "service", "operation", "outcome"),
    registry=REGISTRY,
)
DRIFT = Gauge(
    "vmplane_drift_resources",
    "Resources that differed from the file at the last drift check in this process (drift, plan, apply), by "
    "resource kind and change (missing, changed, extra).",
    ("kind", "change"),
    registry=REGISTRY,
)

OUTCOMES = ("ok", "throttled", "retried", "failed")
# The hot path: one child per label set, found without prometheus-client's label validation.
_children: dict[tuple[str, str, str], Any] = {}
_lock = threading.Lock()


def count_call(cloud: str, method: str, outcome: str, n: int = 1) -> None:
    """Count `n` attempts of `method` ("service.Operation") on `cloud`."""
    key = (cloud, method, outcome)
    child = _children.get(key)
    if child is None:
        service, _, operation = method.partition(".")
        with _lock:
            child = _children[key] = CLOUD_CALLS.labels(cloud, service, operation, outcome)
    child.inc(n)


def observe_step(step: str, cloud: str, phase: str, outcome: str, seconds: float) -> None:
    STEP_DURATION.labels(step, cloud, phase, outcome).observe(seconds)


def set_drift(found: dict[tuple[str, str], int]) -> None:
    """The last check's counts: label sets it did not find go back to 0 (a repaired kind reads 0, not its
    old count)."""
    with _lock:
        for labels in list(_drift_seen):
            if labels not in found:
                DRIFT.labels(*labels).set(0)
        for labels, n in found.items():
            DRIFT.labels(*labels).set(n)
            _drift_seen.add(labels)


_drift_seen: set[tuple[str, str]] = set()


def exposition() -> bytes:
    """The registry in Prometheus' text format."""
    return generate_latest(REGISTRY)


_served: dict[int, Any] = {}


def serve(port: int, addr: str = "127.0.0.1") -> None:
    """Expose the registry over HTTP on `port` (a worker's `--metrics-port`), in a daemon thread."""
    from prometheus_client import start_http_server

    if port not in _served:
        _served[port] = start_http_server(port, addr=addr, registry=REGISTRY)
