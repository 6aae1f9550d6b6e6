"""compute#operation: every mutating compute call answers RUNNING; the next `get` or `wait` says DONE.

The change itself is applied at once (a `get` of the resource sees it); what completes later is only the
operation and what Google does after it (an instance reaching RUNNING, a MIG's instances starting), run
from the operation's `done` hooks. Errors found at validation time are HTTP errors, never operation
errors, as with Google.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from vmplane.sandbox.gcp.errors import not_found
from vmplane.sandbox.gcp.store import Project, Resource, State, now, self_link

Hook = Callable[[], None]


def start(
    state: State,
    project: Project,
    scope: str,
    op_type: str,
    target_key: str,
    target_id: str | None,
    request_id: str | None = None,
    done: Hook | None = None,
) -> Resource:
    name = f"operation-{int(time.time() * 1000)}-{secrets.token_hex(6)}"
    key = f"{scope}/operations/{name}"
    op: Resource = {
        "kind": "compute#operation",
        "id": state.new_id(),
        "name": name,
        "operationType": op_type,
        "targetLink": self_link(project.id, target_key),
        "status": "RUNNING",
        "user": "sandbox@vmplane.test",
        "progress": 0,
        "insertTime": now(),
        "startTime": now(),
        "selfLink": self_link(project.id, key),
    }
    if target_id:
        op["targetId"] = target_id
    if scope.startswith("zones/"):
        op["zone"] = self_link(project.id, scope)
    elif scope.startswith("regions/"):
        op["region"] = self_link(project.id, scope)
    if request_id:
        op["clientOperationId"] = request_id
        project.request_ids[request_id] = key
    project.operations[key] = op
    if done:
        state.op_hooks.setdefault(op["selfLink"], []).append(done)
    return op


def finish(state: State, op: Resource) -> Resource:
    if op["status"] != "DONE":
        op.update(status="DONE", progress=100, endTime=now())
        for hook in state.op_hooks.pop(op["selfLink"], []):
            hook()
    return op


def finish_for(state: State, project: Project, target_link: str) -> None:
    """Reading a resource completes what is pending on it: Google would have finished long ago."""
    for op in list(project.operations.values()):
        if op["status"] != "DONE" and op["targetLink"] == target_link:
            finish(state, op)


def lookup(project: Project, scope: str, name: str) -> Resource:
    op = project.operations.get(f"{scope}/operations/{name}")
    if op is None:
        raise not_found(f"projects/{project.id}/{scope}/operations/{name}")
    return op


def fail(state: State, op: Resource, code: str, message: str) -> Resource:
    """End `op` as Google ends a failed one: DONE, with `error.errors[]` and no `done` hooks run (what
    they would have completed never happened)."""
    state.op_hooks.pop(op["selfLink"], None)
    op.update(
        status="DONE",
        progress=100,
        endTime=now(),
        error={"errors": [{"code": code, "message": message}]},
        httpErrorStatusCode=503 if code == "ZONE_RESOURCE_POOL_EXHAUSTED" else 400,
        httpErrorMessage="SERVICE UNAVAILABLE" if code == "ZONE_RESOURCE_POOL_EXHAUSTED" else "BAD REQUEST",
    )
    return op
