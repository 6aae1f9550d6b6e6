"""One way every cloud call is made, whatever the cloud: counted for the step's tally, SDK errors
translated into vmplane's CloudError tree by the cloud's own translator, transient ones retried with the
shared jittered backoff (waits.retry) to a deadline, metrics and a span per call (vmplane.observe), and
the fault hook after it (faults.py), handed out only through `faults.sandbox_hook`.

A session builds one Transport for its target and runs each call through `call`. An SDK that retries on
its own (botocore's standard mode) keeps its retries and uses the pieces instead, from its own events:
`begin` when a call starts, `end` when it ends, `after` once it succeeded.

Long operations (a GCP operation, a PVE task) are waited on with waits.poll, each check a call through
the transport.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from vmplane.clouds.base import count_call
from vmplane.clouds.errors import CloudError, DependencyViolationError, TransientError
from vmplane.clouds.faults import FaultPause, sandbox_hook
from vmplane.clouds.waits import note_retry, retry
from vmplane.observe import calls

T = TypeVar("T")

RETRY_DEADLINE = 120.0  # transient errors (429, 5xx, resets, a held lock) are retried this long per call
RETRY_FIRST = 0.2  # the first retry's backoff (jittered); it doubles up to RETRY_CAP
RETRY_CAP = 10.0


def transient(err: CloudError) -> bool:
    """Worth another attempt of the same call. "In use" is transient only to teardown, which retries it to
    its own, longer deadline (deletes.py): retried here, it would hold the caller 120 s first."""
    return isinstance(err, TransientError) and not isinstance(err, DependencyViolationError)


def _never(_: CloudError) -> bool:
    return False


def _always(_: str) -> bool:
    return True


class Transport:
    """The calls of one target. `cloud` labels metrics and spans; `translate(exc, name)` maps an SDK error
    (it may raise nothing else); `endpoint(name)` is where a retried call went, for its progress line;
    `throttled(err)` marks routine rate backoff (quiet, counted apart); `is_sandbox()` is asked once, and
    only when the fault hook's variable is set; `hooked(name)` picks the calls the hook may pause after
    (Proxmox: not its GETs)."""

    def __init__(
        self,
        cloud: str,
        *,
        translate: Callable[[Exception, str], CloudError],
        endpoint: Callable[[str], str],
        is_sandbox: Callable[[], bool],
        throttled: Callable[[CloudError], bool] = _never,
        hooked: Callable[[str], bool] = _always,
        deadline: float = RETRY_DEADLINE,
    ) -> None:
        self.cloud = cloud
        self.translate = translate
        self.endpoint = endpoint
        self.throttled = throttled
        self.hooked = hooked
        self.deadline = deadline
        self._is_sandbox = is_sandbox
        self._hook: FaultPause | None = None
        self._hook_known = False
        self._lock = threading.Lock()

    # ---- the pieces (an SDK's own events call these) ----
    def begin(self, name: str) -> Any:
        """An attempt starts: counted in the step's tally. Returns the call's span (None: tracing is off)."""
        count_call(name)
        return calls.started(self.cloud, name)

    def end(
        self, name: str, span: Any, *, retried: Sequence[bool] = (), error: str | None = None, throttled: bool = False
    ) -> None:
        """The call ended (see observe.calls.done for the arguments)."""
        calls.done(self.cloud, name, span, retried=retried, error=error, throttled=throttled)

    def hook(self) -> FaultPause | None:
        """The fault hook for this target, looked up once (faults.sandbox_hook is the guard)."""
        with self._lock:
            if not self._hook_known:
                self._hook = sandbox_hook(self._is_sandbox)
                self._hook_known = True
            return self._hook

    def after(self, name: str) -> None:
        """The call `name` succeeded: the fault hook may pause here."""
        if self.hooked(name):
            hook = self.hook()
            if hook is not None:
                hook.after(name)

    # ---- a whole call ----
    def call(self, name: str, fn: Callable[[], T]) -> T:
        """Run `fn` (one API call named `name`): each attempt counted, errors translated, transient ones
        retried with jittered backoff to the deadline (then a DeadlineExceededError), the outcome in the
        metrics and the span, and the fault hook after a success."""
        span = calls.started(self.cloud, name)
        retried: list[bool] = []  # per retried attempt: was it throttled
        failures: list[CloudError] = []

        def attempt() -> T:
            count_call(name)
            try:
                return fn()
            except Exception as e:
                err = self.translate(e, name)
                failures.append(err)
                raise err from e

        def again(err: CloudError, n: int, deadline: float) -> None:
            throttled = self.throttled(err)
            retried.append(throttled)
            if not throttled:  # throttling is routine backoff; anything else is worth a progress line
                note_retry(self.endpoint(name), str(err), n, deadline=deadline)

        try:
            out = retry(
                attempt,
                what=name,
                timeout=self.deadline,
                first=RETRY_FIRST,
                cap=RETRY_CAP,
                retryable=transient,
                on_retry=again,
            )
        except CloudError as raised:
            last = failures[-1] if failures else raised
            if raised is last:  # refused outright
                self.end(name, span, retried=retried, error=last.code or type(last).__name__)
            else:  # retried to the deadline
                self.end(name, span, retried=retried, error=last.code or "unreachable", throttled=self.throttled(last))
            raise
        self.end(name, span, retried=retried)
        self.after(name)
        return out
