"""compute#operation: every mutating compute call answers RUNNING; the next `get` or `wait` says DONE.

The change itself is applied at once (a `get` of the resource sees it); what completes later is only the
operation and what Google does after it (an instance reaching RUNNING, a MIG's instances starting), run
from the operation's `done` hooks. Errors found at validation time are HTTP errors; what Google finds
only while doing the work (a delete of something in use, a quota, a zone out of stock) ends the
operation DONE with `error.errors[]` instead (`fail`), as Google's do: the HTTP call itself answers 200.
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
        hooks = state.op_hooks.pop(op["selfLink"], [])
        failure = state.op_errors.pop(op["selfLink"], None)
        if failure is not None:  # a failed operation's effects never happen
            op.update(failure)
            return op
        for hook in hooks:
            hook()
    return op


def fail(state: State, op: Resource, code: str, message: str, http_status: int = 400) -> Resource:
    """Make the RUNNING operation `op` end DONE with Google's error (`code`: RESOURCE_IN_USE_BY_ANOTHER_RESOURCE,
    QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED, ...): the caller's HTTP answer still shows it RUNNING, the
    next get/wait shows the error, and its `done` hooks never run. An insert that fails leaves nothing
    behind: its target is taken out of the store now (Google never shows it as created)."""
    if op["status"] == "DONE":
        raise ValueError(f"operation {op['name']} is already DONE")
    state.op_errors[op["selfLink"]] = {
        "error": {"errors": [{"code": code, "message": message}]},
        "httpErrorStatusCode": http_status,
        "httpErrorMessage": _HTTP_MESSAGE.get(http_status, "BAD REQUEST"),
    }
    if op.get("operationType") == "insert":
        project_id, _, key = op["targetLink"].split("/projects/", 1)[1].partition("/")
        found = state.projects.get(project_id)
        if found is not None:
            found.compute.pop(key, None)
    return op


_HTTP_MESSAGE = {
    400: "BAD REQUEST",
    403: "FORBIDDEN",
    409: "CONFLICT",
    412: "PRECONDITION FAILED",
    503: "SERVICE UNAVAILABLE",
}


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
