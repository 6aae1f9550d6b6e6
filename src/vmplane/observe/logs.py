"""vmplane's logs: the `vmplane` logger hierarchy, to stderr, as text (default) or JSON lines.

Every line carries the scope it was written in (job, step, org, cloud, phase) and passes the redaction
filter (`observe.redact`) after formatting, so neither a message, its arguments nor a traceback can write
a secret. stdout is never written: it carries `--output json`.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from vmplane.observe import redact, scope

ROOT = "vmplane"
FORMATS = ("text", "json")
_HANDLER_NAME = "vmplane-observe"
# Other libraries' loggers that go through the same handler: uvicorn's (`vmplane serve`), and DBOS's (it
# adds its own console handler only to a logger that has none, and keeps the level engine.launch gives it).
ADOPTED = ("uvicorn", "uvicorn.error", "uvicorn.access", "dbos")


def get(name: str) -> logging.Logger:
    """The logger for a vmplane module (`__name__`), under the `vmplane` hierarchy."""
    return logging.getLogger(name if name.startswith(ROOT) else f"{ROOT}.{name}")


class _Scoped(logging.Formatter):
    def scope_of(self, record: logging.LogRecord) -> dict[str, str]:
        # The scope of the thread that logged: read here, as the handler runs in that thread.
        return scope.current().fields()


class TextFormatter(_Scoped):
    """`2026-12-01T20:00:00Z INFO [job step] message`: one line per record, for people."""

    def format(self, record: logging.LogRecord) -> str:
        fields = self.scope_of(record)
        where = " ".join(fields[k] for k in ("job", "step") if k in fields)
        line = f"{_time(record)} {record.levelname} {f'[{where}] ' if where else ''}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact.redact(line)


class JsonFormatter(_Scoped):
    """One JSON object per line: time (RFC 3339 UTC), level, job, step, org, message, and cloud, phase and
    logger when known."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "job": None,
            "step": None,
            "org": None,
            # Redacted before encoding: JSON's escapes would hide a secret with a quote or backslash in it.
            "message": redact.redact(record.getMessage()),
        }
        doc.update(self.scope_of(record))
        doc["logger"] = record.name
        if record.exc_info:
            doc["exception"] = redact.redact(self.formatException(record.exc_info))
        return json.dumps(doc, default=str)


def _time(record: logging.LogRecord) -> str:
    t = datetime.fromtimestamp(record.created, UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


_state = {"format": "text", "explicit": False}


def configure(fmt: str = "text", level: str | None = None, stream: TextIO | None = None) -> None:
    """Send the `vmplane` loggers (and uvicorn's) to `stream` (stderr) in `fmt`, at `level` (default
    WARNING: a CLI command's progress is its own output, logs only add what went wrong). Idempotent: a
    second call replaces the handler."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be text or json, not {fmt!r}")
    resolved = logging.getLevelName(level.upper()) if level else logging.WARNING
    if not isinstance(resolved, int):
        raise ValueError(f"log level must be debug, info, warning or error, not {level!r}")
    _state.update(format=fmt, explicit=bool(level))
    redact.remember_environment()
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    for name in (ROOT, *ADOPTED):
        log = logging.getLogger(name)
        for old in [h for h in log.handlers if h.get_name() == _HANDLER_NAME or name in ADOPTED]:
            log.removeHandler(old)
        log.addHandler(handler)
        log.propagate = False
        log.setLevel(resolved)


def reset() -> None:
    """Take vmplane's handler off every logger `configure` touched (tests; a library embedding vmplane)."""
    for name in (ROOT, *ADOPTED):
        log = logging.getLogger(name)
        for h in [h for h in log.handlers if h.get_name() == _HANDLER_NAME]:
            log.removeHandler(h)
        log.propagate = True
        log.setLevel(logging.NOTSET)
    _state.update(format="text", explicit=False)


def serving(stream: TextIO | None = None) -> None:
    """For the long-running commands (`serve`, `worker`): INFO unless a level was chosen, and uvicorn's
    loggers (which its own config replaced) back on vmplane's handler."""
    level = logging.getLevelName(logging.getLogger(ROOT).level) if _state["explicit"] else "INFO"
    configure(str(_state["format"]), level, stream)


def current_format() -> str:
    return str(_state["format"])
