"""Waiting on compute operations ourselves, with the clients the driver built (see session.py for why
`ExtendedOperation.result()` is not used), and the find-or-create / delete patterns every module uses.

`wait` calls the scope's `operations.wait` (Google holds it open up to ~2 minutes, returning early when
the operation finishes) in waits.poll, the loop every long operation is waited in, so a real cloud is not
hammered and the sandbox answers at once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from vmplane.clouds.deletes import TEARDOWN_TIMEOUT, delete
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.gcp.errors import operation_error
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients, new_request_id
from vmplane.clouds.waits import poll

OPERATION_TIMEOUT = 900.0  # a regional MIG or a global LB resource can take minutes


def last_segment(url: str) -> str:
    """`https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a` -> `us-central1-a`."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def wait(gcp: GcpClients, op: Any, *, what: str, timeout: float = OPERATION_TIMEOUT) -> None:
    """Block until the compute Operation `op` is DONE; raise its error (translated) if it failed."""
    current = op

    def done() -> Any | None:
        nonlocal current
        if not _is_done(current):
            current = _wait_once(gcp, current)
        return current if _is_done(current) else None

    # `operations.wait` long-polls on Google's side, so a wait that returns RUNNING has already waited:
    # the loop's own sleeps stay short.
    finished = poll(done, what=f"{what} ({op.name})", timeout=timeout, first=0.05, cap=1.0)
    if finished.error and list(finished.error.errors):
        raise operation_error(finished, what)


def _is_done(op: Any) -> bool:
    return str(getattr(op.status, "name", op.status)) == "DONE"


def run(gcp: GcpClients, method: str, call: Callable[[], Any], *, what: str) -> None:
    """One mutating compute call and its operation, waited to DONE (errors of either translated)."""
    wait(gcp, gcp.call(method, call), what=what)


def find(gcp: GcpClients, method: str, get: Callable[[], Any]) -> Any | None:
    """The resource `get` returns, or None when it does not exist."""
    try:
        return gcp.call(method, get)
    except NotFoundError:
        return None


def create(gcp: GcpClients, method: str, insert: Callable[[str], Any], *, what: str) -> None:
    """Run an insert (given its requestId, fixed across retries of this call) and wait for it.

    Callers look the resource up by its deterministic name first; the requestId covers a retry of the
    same insert after a lost response.
    """
    request_id = new_request_id()
    run(gcp, method, lambda: insert(request_id), what=what)


def remove(
    gcp: GcpClients,
    method: str,
    call: Callable[[], Any],
    *,
    what: str,
    timeout: float = TEARDOWN_TIMEOUT,
    sleep: Callable[[float], None] | None = None,
) -> bool:
    """Delete under the teardown rule (NotFound is done, in use retries to the deadline), waiting for the
    operation; True if this call deleted it."""

    return delete(lambda: run(gcp, method, call, what=what), what=what, timeout=timeout, sleep=sleep)


def _wait_once(gcp: GcpClients, op: Any) -> Any:
    scope: dict[str, str] = {}
    if op.zone:
        kind, scope = "Zone", {"zone": last_segment(op.zone)}
    elif op.region:
        kind, scope = "Region", {"region": last_segment(op.region)}
    else:
        kind = "Global"
    client = gcp.compute(f"{kind}Operations")
    method = f"compute.{kind[0].lower()}{kind[1:]}Operations.wait"
    name = op.name
    return gcp.call(method, lambda: client.wait(project=gcp.project, operation=name, timeout=CALL_TIMEOUT * 3, **scope))


def patch_current(
    gcp: GcpClients,
    method: str,
    get: Callable[[], Any],
    send: Callable[[str, str], Any],
    *,
    what: str,
) -> None:
    """Read-modify-write of a fingerprinted resource (backend service, URL map, MIG): `send(fingerprint,
    request_id)` makes the change with the fingerprint `get()` reads now. Google answers 412
    conditionNotMet when it is missing or stale (someone changed the resource in between): read again
    and send once more; a second 412 is a real conflict and is raised."""
    from vmplane.clouds.errors import ConflictError

    for attempt in (1, 2):
        fingerprint = str(gcp.call(method.rsplit(".", 1)[0] + ".get", get).fingerprint)
        request_id = new_request_id()
        try:
            run(gcp, method, partial(send, fingerprint, request_id), what=what)
            return
        except ConflictError as e:
            if attempt == 2 or e.code != "conditionNotMet":
                raise
