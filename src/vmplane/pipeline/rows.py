"""The job row's writes from the steps running side by side: serialised, re-read and re-applied on a conflict."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from vmplane.store.db import transaction

T = TypeVar("T")


def db_url() -> str:
    from vmplane.settings import get_settings

    return get_settings().db_url


# Steps run side by side in threads of this process; their writes to the job row are serialised here
# (and each write reads the row afresh), so one step's record never overwrites another's.
WRITE_LOCK = threading.Lock()


def write(url: str, fn: Callable[[Session], T], attempts: int = 5) -> T:
    """Apply `fn` to the job row in its own transaction. Another process may have written the row since
    it was read (the row is versioned): then read it again and re-apply; every `fn` here is a merge."""
    for attempt in range(attempts):
        try:
            with WRITE_LOCK, transaction(url) as s:
                return fn(s)
        except StaleDataError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")
