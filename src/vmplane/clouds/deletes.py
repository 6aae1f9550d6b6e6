"""The one teardown rule for every delete, on every cloud (each driver classifies "in use" once):

- NotFound is done: the resource is already gone (a crash after the delete, a concurrent destroy, a
  recorded id whose resource AWS has dropped). Never an error, or an interrupted destroy could never finish.
- DependencyViolation (AWS's "in use" in all its spellings, classified once in `aws.errors.translate`)
  retries with backoff until a deadline: dependents are still going away. On AWS that takes minutes
  (a NAT gateway's EIP stays "mapped" to the internet gateway well after DeleteNatGateway returns),
  so the production deadline is 15 minutes.
- Transient errors (throttling, 5xx) retry too; anything else fails the step at once.
"""

from __future__ import annotations

from collections.abc import Callable

from vmplane.clouds.errors import DependencyViolationError, NotFoundError
from vmplane.clouds.waits import retry

TEARDOWN_TIMEOUT = 900.0


def delete(
    call: Callable[[], object],
    *,
    what: str,
    timeout: float = TEARDOWN_TIMEOUT,
    sleep: Callable[[float], None] | None = None,
) -> bool:
    """Run one delete call under the teardown rule. True if this call deleted it, False if it was gone."""

    def attempt() -> bool:
        try:
            call()
        except NotFoundError:
            return False
        return True

    return retry(
        attempt, what=what, timeout=timeout, retry_on=(DependencyViolationError,), first=0.2, cap=15.0, sleep=sleep
    )
