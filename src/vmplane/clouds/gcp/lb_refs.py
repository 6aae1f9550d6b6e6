"""What the load-balancer modules share: references between resources, the find-ours-or-create pattern,
and the spec's loadBalancer block.

References are written project-relative (`projects/P/global/healthChecks/x`), which Google accepts
wherever a URL is expected, and compared by that tail, so a self-link from any endpoint (Google's or
the sandbox's) matches the reference we would write.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.gcp import operations
from vmplane.clouds.gcp.ownership import owned_by, owner_of
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.waits import read_after_create
from vmplane.envspec.models import LoadBalancer

# Google's health checkers and the GFE proxies of the global external Application Load Balancer.
HEALTH_CHECK_RANGES = ["35.191.0.0/16", "130.211.0.0/22"]
NAMED_PORT = "http"


def lb_block(ctx: Context) -> LoadBalancer:
    if ctx.spec.load_balancer is None:
        raise InvalidRequestError("this environment has no loadBalancer block")
    return ctx.spec.load_balancer


def ref(gcp: GcpClients, path: str) -> str:
    """`global/healthChecks/x` -> `projects/<project>/global/healthChecks/x`."""
    return f"projects/{gcp.project}/{path}"


def tail(url: str | None) -> str:
    """A self-link or reference reduced to `projects/...`, for comparisons ('' for None)."""
    if not url:
        return ""
    at = url.find("projects/")
    return url[at:] if at >= 0 else url


def network_ref(gcp: GcpClients, network: str) -> str:
    """The VMs' network (`InfraConfig.NetworkID`: a name, or a self-link for an existing network)."""
    return tail(network) if "/" in network else ref(gcp, f"global/networks/{network}")


def find_ours(gcp: GcpClients, ctx: Context, method: str, get: Callable[[], Any], name: str) -> Any | None:
    """The resource of this deterministic name, None if absent; refused if someone else's."""
    found = operations.find(gcp, method, get)
    if found is not None and not owned_by(found, ctx.tagger):
        raise ConflictError(f"{name} exists and belongs to {owner_of(found, ctx.tagger)}; vmplane will not adopt it")
    return found


def ensure(
    gcp: GcpClients,
    ctx: Context,
    collection: str,
    name: str,
    *,
    get: Callable[[], Any],
    insert: Callable[[str], Any],
) -> tuple[Any, bool]:
    """Find by name (checked as ours) or insert, then read it back: (resource, created)."""
    found = find_ours(gcp, ctx, f"compute.{collection}.get", get, name)
    if found is not None:
        return found, False
    operations.create(gcp, f"compute.{collection}.insert", insert, what=f"create {name}")
    return read_after_create(lambda: gcp.call(f"compute.{collection}.get", get), what=f"read {name} back"), True


def ensure_global(
    gcp: GcpClients, ctx: Context, collection: str, client_name: str, key: str, resource: Any
) -> tuple[Any, bool]:
    """`ensure` for a global compute resource whose get and insert take `<key>` / `<key>_resource`
    (every part of the LB chain): found by `resource.name` (checked as ours) or inserted, then read
    back: (resource, created)."""
    client = gcp.compute(client_name)
    name = resource.name

    def insert(request_id: str) -> Any:
        req = {"project": gcp.project, f"{key}_resource": resource, "request_id": request_id}
        return client.insert_unary(request=req, timeout=CALL_TIMEOUT)

    get = partial(client.get, project=gcp.project, timeout=CALL_TIMEOUT, **{key: name})
    return ensure(gcp, ctx, collection, name, get=get, insert=insert)


def modify(gcp: GcpClients, collection: str, client_name: str, key: str, name: str, verb: str, **body: Any) -> None:
    """One in-place change of a global resource, waited to DONE: a `patch`, or a `set*` call that moves a
    reference (a proxy's URL map or certificates, a rule's target). `verb` is the API's (`setUrlMap`);
    `body` the call's one resource argument."""
    client = gcp.compute(client_name)
    call = getattr(client, re.sub(r"(?<!^)([A-Z])", r"_\1", verb).lower() + "_unary")
    what = f"update {name} ({verb})"
    (field, resource), *_ = body.items()
    if verb == "patch" and "fingerprint" in type(resource).meta.fields:
        # A URL map (or any fingerprinted resource) changes only with its current fingerprint (412 otherwise).
        get = partial(client.get, project=gcp.project, timeout=CALL_TIMEOUT, **{key: name})

        def send(fingerprint: str, request_id: str) -> Any:
            changed = type(resource)(resource)
            changed.fingerprint = fingerprint
            req = {"project": gcp.project, key: name, field: changed, "request_id": request_id}
            return call(request=req, timeout=CALL_TIMEOUT)

        operations.patch_current(gcp, f"compute.{collection}.patch", get, send, what=what)
        return
    operations.run(
        gcp,
        f"compute.{collection}.{verb}",
        lambda: call(project=gcp.project, timeout=CALL_TIMEOUT, **{key: name}, **body),
        what=what,
    )
