"""The scope, span and log lines of one job phase (provision, teardown, operation) as a workflow runs it.

Steps read this scope (`observe.scope`) and nest their spans under the job's: `pipeline.stepgraph` runs
each step in a copy of this context. The environment's runtime settings (env values, file contents) are
registered as secrets first, so no log line of the job can show them (`observe.redact`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from vmplane.observe import logs, redact, tracing
from vmplane.observe.scope import scoped
from vmplane.store import job_rows as jobs
from vmplane.store.db import transaction

_log = logs.get(__name__)


def _db_url() -> str:
    from vmplane.settings import get_settings

    return get_settings().db_url


def runtime_secrets(config: dict[str, Any]) -> list[str]:
    """The plain runtime values, to redact. A `{"secret": ref}` has no value here (the VM reads it), and its
    reference is no secret: a log may name it. An `env:` value is remembered by the push that reads it."""
    runtime = (config.get("spec") or {}).get("runtime") or {}
    values = [*(runtime.get("env") or {}).values(), *(runtime.get("files") or {}).values()]
    return [v for v in values if isinstance(v, str)]


@contextmanager
def job_phase(job_id: str, phase: str) -> Iterator[Callable[[str], str]]:
    """Scope and span for the body; yields `ended(status)`, which logs the phase's end and returns `status`."""
    with transaction(_db_url()) as s:
        row = jobs.get_row(s, job_id)
        org, config = row.org, row.config
    redact.remember(runtime_secrets(config))
    cloud = str(config.get("target", {}).get("cloud", "")) or None
    attrs = {"vmplane.job": job_id, "vmplane.phase": phase, "vmplane.org": org, "cloud": cloud or ""}
    with scoped(job=job_id, phase=phase, org=org, cloud=cloud), tracing.span("vmplane.job", attrs) as span:
        _log.info("job %s: %s started", job_id, phase)

        def ended(status: str) -> str:
            if span is not None:
                span.set_attribute("vmplane.status", status)
            level = 30 if status in ("failed", "delete_failed") else 20
            _log.log(level, "job %s: %s ended %s", job_id, phase, status)
            return status

        yield ended
