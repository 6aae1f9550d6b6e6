"""EC2's eventual consistency, handled once for every call of a client: an id a create answered with
can be unknown to the next requests for a while ("The vpc ID 'vpc-…' does not exist", right after
CreateVpc), https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html. Such a NotFound is
retried with backoff while the id is younger than NOT_YET_WINDOW; an id older than that, or one this
client never saw created, is really gone and fails at once (a deleted resource stays a NotFoundError).
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from typing import Any

# AWS advises backing off for "up to a few minutes"; a minute covers what is seen in practice while a
# resource that is really gone (deleted out of band) still fails within a bounded time.
NOT_YET_WINDOW = 60.0
MAX_DELAY = 2.0
_ID = re.compile(r"^(?:vpc|subnet|sg|igw|rtb|nat|eipalloc|i|lt|eni|vol)-[0-9a-f]{8,17}$")
_NOT_YET_CODES = ("NatGatewayNotFound", "InvalidAllocationID.NotFound")


class RecentIds:
    """Ids the client's creates answered with, and when; shared by the client's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._born: dict[str, float] = {}

    def after_call(self, parsed: Any, model: Any, **_: Any) -> None:
        """after-call: remember the ids a successful create answered with."""
        if not model.name.startswith(("Create", "Run", "Allocate")) or not isinstance(parsed, dict):
            return
        now = time.monotonic()
        with self._lock:
            for value in _strings(parsed):
                if _ID.match(value):
                    self._born.setdefault(value, now)
            # Forget what can no longer be "not yet": the map stays as small as a minute of creates.
            for old in [k for k, t in self._born.items() if now - t > NOT_YET_WINDOW]:
                del self._born[old]

    def needs_retry(self, response: Any = None, request_dict: Any = None, attempts: int = 0, **_: Any) -> float | None:
        """needs-retry: the delay before retrying a NotFound for an id created moments ago, else None
        (no opinion: botocore's own retry handler decides)."""
        if response is None:
            return None
        code = str((response[1].get("Error") or {}).get("Code", "")) if isinstance(response[1], dict) else ""
        if not (code.endswith(".NotFound") or code in _NOT_YET_CODES):
            return None
        now = time.monotonic()
        with self._lock:
            young = any(now - self._born.get(v, -1e9) < NOT_YET_WINDOW for v in _request_values(request_dict))
        if not young:
            return None
        return float(min(0.1 * 2**attempts, MAX_DELAY))


def _strings(data: Any) -> list[str]:
    out: list[str] = []
    todo = [data]
    while todo:
        cur = todo.pop()
        if isinstance(cur, dict):
            todo += [v for k, v in cur.items() if k != "ResponseMetadata"]
        elif isinstance(cur, list):
            todo += cur
        elif isinstance(cur, str):
            out.append(cur)
    return out


def _request_values(request_dict: Any) -> list[str]:
    """The values a query-protocol request sends (EC2's body is a dict before it is encoded)."""
    body = (request_dict or {}).get("body")
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if isinstance(body, str):
        body = {k: vs[-1] for k, vs in urllib.parse.parse_qs(body).items()}
    if isinstance(body, dict):  # a filter naming an unknown id matches nothing: never a NotFound
        return [str(v) for k, v in body.items() if not str(k).startswith("Filter.")]
    return []
