"""Deadlines, adaptive polling and retries shared by every driver.

Polling starts fast and backs off, so an emulator answering in milliseconds finishes in milliseconds
while a real cloud is not hammered. Retries happen only for errors marked retryable.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from vmplane.clouds.errors import CloudError, DeadlineExceededError

T = TypeVar("T")


def poll(
    check: Callable[[], T | None],
    *,
    what: str,
    timeout: float,
    first: float = 0.05,
    factor: float = 1.6,
    cap: float = 5.0,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """Call `check` until it returns something other than None, or raise at the deadline."""
    sleep = sleep or time.sleep  # looked up per call, so a test's fake clock reaches every wait
    deadline = time.monotonic() + timeout
    delay = first
    while True:
        result = check()
        if result is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceededError(f"timed out after {timeout:.0f}s waiting for {what}")
        sleep(min(delay, remaining))
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
) -> T:
    """Run `call`, retrying retryable CloudErrors (and `retry_on`) with jittered backoff until the deadline."""
    sleep = sleep or time.sleep
    deadline = time.monotonic() + timeout
    delay = first
    while True:
        try:
            return call()
        except CloudError as e:
            if not (e.retryable or isinstance(e, retry_on)):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceededError(f"gave up on {what} after {timeout:.0f}s: {e}") from e
            sleep(min(delay * random.uniform(0.5, 1.0), remaining))
            delay = min(delay * 2, cap)
