"""Deadlines, adaptive polling and retries shared by every driver.

Polling starts fast and backs off, so an emulator answering in milliseconds finishes in milliseconds
while a real cloud is not hammered. The backoff is also held to a fraction of the time waited so far
(`late`): a resource that becomes ready after T seconds is seen at most ~`late` x T later (and never more
than `cap` later), at any scale of T, where a plain geometric backoff overshoots by up to (factor - 1) x T
(a 20 s NAT wait polled 0.1 s x 1.6^n capped at 10 s is seen at 28.2 s). Retries happen only for errors
marked retryable.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from vmplane.clouds.errors import CloudError, DeadlineExceededError

T = TypeVar("T")
log = logging.getLogger(__name__)

# How late a wait may see its resource, as a fraction of the time waited (see the module docstring).
LATE = 0.1


def poll(
    check: Callable[[], T | None],
    *,
    what: str,
    timeout: float,
    first: float = 0.05,
    factor: float = 1.6,
    cap: float = 5.0,
    late: float | None = LATE,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """Call `check` until it returns something other than None, or raise at the deadline.

    Each sleep is the smallest of the geometric backoff (`first` x `factor`^n), `cap`, the time left,
    and (unless `late` is None) `late` x the time waited so far, but at least `first`. `late=None` is
    for checks that cost a quota (a run command, a rate-limited query) rather than a describe call.
    """
    sleep = sleep or time.sleep  # looked up per call, so a test's fake clock reaches every wait
    start = time.monotonic()
    deadline = start + timeout
    delay = first
    while True:
        result = check()
        if result is not None:
            return result
        now = time.monotonic()
        remaining = deadline - now
        if remaining <= 0:
            raise DeadlineExceededError(f"timed out after {timeout:.0f}s waiting for {what}")
        step = delay if late is None else min(delay, max(first, late * (now - start)))
        sleep(min(step, remaining))
        delay = min(delay * factor, cap)


def retry(
    call: Callable[[], T],
    *,
    what: str,
    timeout: float,
    retry_on: tuple[type[CloudError], ...] = (),
    first: float = 0.1,
    cap: float = 5.0,
    sleep: Callable[[float], None] | None = None,
    retryable: Callable[[CloudError], bool] | None = None,
    on_retry: Callable[[CloudError, int, float], None] | None = None,
) -> T:
    """Run `call`, retrying retryable CloudErrors (and `retry_on`) with jittered backoff until the deadline.

    `retryable` replaces the default test (`e.retryable` or `retry_on`); `on_retry(error, attempt, deadline)`
    is told of each retry before its sleep (`deadline` is a time.monotonic() value), e.g. for a progress line.
    """
    sleep = sleep or time.sleep
    deadline = time.monotonic() + timeout
    delay = first
    attempt = 0
    while True:
        try:
            return call()
        except CloudError as e:
            wanted = retryable(e) if retryable is not None else e.retryable or isinstance(e, retry_on)
            if not wanted:
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceededError(f"gave up on {what} after {timeout:.0f}s: {e}") from e
            attempt += 1
            if on_retry is not None:
                on_retry(e, attempt, deadline)
            sleep(min(delay * random.uniform(0.5, 1.0), remaining))
            delay = min(delay * 2, cap)


def note_retry(endpoint: str, why: str, attempt: int, *, deadline: float | None = None, of: int | None = None) -> None:
    """The progress line of a call being retried on a transient error (a timeout, a reset, a 5xx), on stderr
    and in the job's log: "retrying <endpoint>: <why> (attempt n, until HH:MM:SSZ)". `deadline` is a
    time.monotonic() value; SDKs that count attempts instead (botocore) pass `of`."""
    if deadline is not None:
        until = datetime.now(UTC) + timedelta(seconds=max(0.0, deadline - time.monotonic()))
        bound = f", until {until:%H:%M:%S}Z"
    else:
        bound = f" of {of}" if of else ""
    log.warning("retrying %s: %s (attempt %d%s)", endpoint, why, attempt, bound)


# How long a resource just created may stay unknown to reads ("not found yet"): EC2's eventual consistency
# (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html) and a read racing an insert.
NOT_YET_TIMEOUT = 60.0


def read_after_create(call: Callable[[], T], *, what: str, timeout: float = NOT_YET_TIMEOUT) -> T:
    """A read of something this job has just created: a NotFound means "not yet" and is retried, to a
    deadline (past it, the resource is really not there, and the NotFound becomes a DeadlineExceededError)."""
    from vmplane.clouds.errors import NotFoundError

    return retry(call, what=what, timeout=timeout, retry_on=(NotFoundError,))
