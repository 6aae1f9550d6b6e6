"""One cloud API call, as the SDK hooks see it: counted by outcome, logged when it was retried or failed,
and a span under the step's when tracing is on. Shared by the AWS (botocore events) and GCP (its retry
loop) sessions; the per-step tally of `clouds.base.count_call` stays as it is (it feeds bench/).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vmplane.observe import logs, metrics, tracing

_log = logs.get("vmplane.clouds.calls")


def started(cloud: str, method: str) -> Any:
    """The call's span (None when tracing is off); hand it to `done`."""
    if not tracing.enabled():
        return None
    service, _, operation = method.partition(".")
    return tracing.start(method, {"cloud": cloud, "rpc.system": cloud, "rpc.service": service, "rpc.method": operation})


def done(
    cloud: str,
    method: str,
    span: Any,
    *,
    retried: Sequence[bool] = (),
    error: str | None = None,
    throttled: bool = False,
) -> None:
    """The call has ended. `retried` holds, per attempt that was retried, whether it was throttled; `error`
    is the final attempt's error code (None: it succeeded), `throttled` whether that one was refused for rate."""
    if retried:
        n_throttled = sum(retried)
        if n_throttled:
            metrics.count_call(cloud, method, "throttled", n_throttled)
        if len(retried) > n_throttled:
            metrics.count_call(cloud, method, "retried", len(retried) - n_throttled)
    if error is None:
        outcome = "retried" if retried else "ok"
        metrics.count_call(cloud, method, "ok")
    else:
        outcome = "throttled" if throttled else "failed"
        metrics.count_call(cloud, method, outcome)
    if retried:
        how = f"{len(retried)} retries ({sum(retried)} throttled)"
        if error is None:
            _log.warning("%s %s succeeded after %s", cloud, method, how)
        else:
            _log.warning("%s %s gave up after %s: %s", cloud, method, how, error)
    elif error is not None:
        # A refusal on the first attempt is often an expected answer (a lookup of something absent).
        _log.log(30 if throttled else 20, "%s %s failed: %s", cloud, method, error)
    if span is not None:
        tracing.end(span, {"vmplane.outcome": outcome, "vmplane.retries": len(retried)}, error)
