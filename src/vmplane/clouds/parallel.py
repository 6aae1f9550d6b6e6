"""Independent cloud calls of one step, side by side.

On a real cloud each call is tens of milliseconds or more, so reads that do not depend on each other
(preflight's lookups, the leftover scan) and creates that do not (two subnets, a gateway beside an
address) cost one call's time instead of their sum. boto3 clients and the GCP clients are thread-safe;
each call runs in a copy of the caller's context, so the step's API-call tally and the sandbox's
fault hooks see it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_THREADS = 8  # well under the SDKs' connection pools (botocore: 10 per client)


def side_by_side(*calls: Callable[[], Any]) -> list[Any]:
    """Run `calls` concurrently and return their results in order. Every call runs to its end; then
    the first failure in order is raised, so a step never returns while one of its calls still runs."""
    if len(calls) <= 1:
        return [c() for c in calls]
    with ThreadPoolExecutor(max_workers=min(len(calls), MAX_THREADS), thread_name_prefix="vmplane-call") as pool:
        futures = [pool.submit(contextvars.copy_context().run, c) for c in calls]
    return [f.result() for f in futures]
