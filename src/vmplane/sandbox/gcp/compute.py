"""Compute Engine's generic verbs (insert/get/list/delete/patch/update) over the store, and the registry
that maps a discovery method id (`compute.networks.insert`) to its handler.

A resource family (compute_network.py, ...) registers a `Kind`: how to resolve its references, fill in
what Google fills in, and what happens around a delete. References are normalised to full selfLinks
when stored, so "is this in use?" is a scan for the selfLink in every other resource of the project.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vmplane.sandbox.gcp import operations
from vmplane.sandbox.gcp.discovery import Method
from vmplane.sandbox.gcp.errors import ApiError, already_exists, condition_not_met, in_use, invalid, not_found
from vmplane.sandbox.gcp.filters import compile_filter
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import (
    Project,
    Resource,
    State,
    check_labels,
    check_name,
    now,
    parse_ref,
    public,
    scope_key,
    self_link,
)

_SCOPE_PARAMS = ("project", "zone", "region")
# Method resources whose URL collection has another name.
COLLECTION = {
    "regionInstanceTemplates": "instanceTemplates",
    "regionInstanceGroupManagers": "instanceGroupManagers",
    "regionAutoscalers": "autoscalers",
    "regionInstanceGroups": "instanceGroups",
    "globalAddresses": "addresses",
    "globalForwardingRules": "forwardingRules",
    "globalOperations": "operations",
    "regionOperations": "operations",
    "zoneOperations": "operations",
}


@dataclass
class Call:
    state: State
    method: Method
    params: dict[str, str]
    query: dict[str, Any]
    body: Any
    schemas: dict[str, Any]
    media: bytes | None = None  # an upload's data (Cloud Storage), its metadata being `body`
    content_type: str = ""  # the media's Content-Type
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased; Secret Manager records the caller

    @property
    def project(self) -> Project:
        return self.state.project(self.params["project"])

    @property
    def scope(self) -> str:
        return scope_key(self.params)

    @property
    def collection(self) -> str:
        return COLLECTION.get(self.method.resource, self.method.resource)

    @property
    def name(self) -> str:
        """The resource the call is about: the last path parameter, or (autoscalers' patch) a query one."""
        in_path = [p for p in self.method.order if self.method.params[p].get("location") == "path"]
        last = in_path[-1] if in_path else "project"
        if last not in _SCOPE_PARAMS:
            return self.params[last]
        given = self.query.get(self.method.resource.removeprefix("region").lower()[:-1]) or self.query.get("autoscaler")
        return str(given or (self.body or {}).get("name", ""))

    @property
    def key(self) -> str:
        return f"{self.scope}/{self.collection}/{self.name}"

    def link(self, key: str | None = None) -> str:
        return self_link(self.project.id, key or self.key)

    def get(self, key: str | None = None) -> Resource:
        found = self.project.compute.get(key or self.key)
        if found is None:
            raise not_found(f"projects/{self.project.id}/{key or self.key}")
        return found

    def operation(
        self, op_type: str | None = None, target: Resource | None = None, done: Hook | None = None
    ) -> Resource:
        return operations.start(
            self.state,
            self.project,
            self.scope,
            op_type or self.method.verb,
            self.key if target is None else key_of(target),
            (target or self.project.compute.get(self.key) or {}).get("id"),
            self.query.get("requestId"),
            done,
        )

    def kind_of(self, schema: str) -> str:
        return str(self.schemas[schema]["properties"]["kind"].get("default", ""))


Hook = Callable[[], None]
Handler = Callable[[Call], Resource]
Resolve = Callable[[str, Any, tuple[str, ...]], Any]
HANDLERS: dict[str, Handler] = {}


@dataclass
class Kind:
    collection: str
    schema: str
    noun: str  # "network": Google's wording in errors
    refs: Callable[[Resource, Resolve], None] = lambda _r, _ref: None
    prepare: Callable[[Call, Resource], None] | None = None  # fill defaults, semantic checks; before storing
    created: Callable[[Call, Resource], Hook | None] | None = None  # after storing; the operation's done hook
    deleting: Callable[[Call, Resource], None] | None = None


def key_of(resource: Resource) -> str:
    return str(resource["selfLink"]).split("/projects/", 1)[1].split("/", 1)[1]


def resolver(call: Call) -> Resolve:
    """Normalises a reference to a full selfLink after checking it exists (None passes through)."""

    def resolve(field: str, value: Any, collections: tuple[str, ...]) -> Any:
        if value is None:
            return None
        project, key = parse_ref(value, call.project.id, field)
        parts = key.split("/")
        if parts[-2] not in collections:
            raise invalid(f"Invalid value for field '{field}': '{value}'. Expected a reference to {collections[0]}.")
        if key not in call.state.project(project).compute:
            noun = parts[-2].rstrip("s")
            raise invalid(
                f"Invalid value for field '{field}': '{value}'. The referenced {noun} resource cannot be found."
            )
        return self_link(project, key)

    return resolve


# Top-level fields that list a resource's users, not what it uses (a network's subnetworks, an
# address's users): they must not make the listed resources look in use.
_BACKREFS = ("selfLink", "subnetworks", "users", "instanceGroup")


def _strings(value: Any, top: bool = False) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if not (top and k in _BACKREFS) and (not k.startswith("_") or k == "_uses"):
                yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def check_unused(project: Project, link: str, noun: str) -> None:
    for key, other in project.compute.items():
        if other.get("selfLink") != link and link in _strings(other, top=True):
            raise in_use(noun, link.split("/compute/v1/")[1], f"projects/{project.id}/{key}")


def insert(call: Call, kind: Kind) -> Resource:
    body = require_body(call.body)
    name = check_name(body.get("name"))
    key = f"{call.scope}/{kind.collection}/{name}"
    if key in call.project.compute:
        raise already_exists(f"projects/{call.project.id}/{key}")
    resource = copy.deepcopy(body)
    check_labels(resource.get("labels"))
    kind.refs(resource, resolver(call))
    resource.update(
        kind=call.kind_of(kind.schema),
        id=call.state.new_id(),
        creationTimestamp=now(),
        selfLink=call.link(key),
    )
    if call.scope.startswith("zones/"):
        resource["zone"] = call.link(call.scope)
    elif call.scope.startswith("regions/"):
        resource["region"] = call.link(call.scope)
    if "labels" in call.schemas[kind.schema]["properties"]:
        resource.setdefault("labels", {})
        resource["labelFingerprint"] = fingerprint_of(resource.get("labels"))
    if kind.prepare:
        kind.prepare(call, resource)
    call.project.compute[key] = resource
    done = kind.created(call, resource) if kind.created else None
    return operations.start(
        call.state, call.project, call.scope, "insert", key, resource["id"], call.query.get("requestId"), done
    )


def fingerprint_of(value: Any) -> str:
    import base64
    import hashlib
    import json

    return base64.b64encode(hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()[:8]).decode()


def set_labels(call: Call) -> Resource:
    """`setLabels` on any resource that takes labels: the whole map replaced, given the current fingerprint."""
    r = call.get()
    body = require_body(call.body)
    if body.get("labelFingerprint") != r.get("labelFingerprint"):
        raise condition_not_met("Labels fingerprint either invalid or resource labels have changed")
    check_labels(body.get("labels"))
    r["labels"] = dict(body.get("labels") or {})
    r["labelFingerprint"] = fingerprint_of(r["labels"])
    return call.operation("setLabels", r)


def get(call: Call) -> Resource:
    resource = call.get()
    operations.finish_for(call.state, call.project, resource["selfLink"])
    return public(resource)


def list_(call: Call, collection: str | None = None) -> Resource:
    collection = collection or call.collection
    prefix = f"{call.scope}/{collection}/"
    matches = compile_filter(call.query.get("filter"))
    for resource in list(call.project.compute.values()):
        if key_of(resource).startswith(prefix):
            operations.finish_for(call.state, call.project, resource["selfLink"])
    items = [
        public(r)
        for key, r in call.project.compute.items()
        if key.startswith(prefix) and key.count("/") == prefix.count("/") and matches(r)
    ]
    out: Resource = {
        "kind": call.kind_of(call.method.response or ""),
        "id": f"projects/{call.project.id}/{call.scope}/{collection}",
        "items": items,
        "selfLink": call.link(f"{call.scope}/{collection}"),
    }
    return out


IN_USE_CODE = "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"


def delete(call: Call, kind: Kind) -> Resource:
    """Google accepts a delete of something in use and fails its *operation* (rule op-in-use)."""
    resource = call.get()
    try:
        check_unused(call.project, resource["selfLink"], kind.noun)
        if kind.deleting:
            kind.deleting(call, resource)
    except ApiError as e:
        if e.reason != "resourceInUseByAnotherResource":
            raise
        return operations.fail(call.state, call.operation("delete", resource), IN_USE_CODE, e.message)
    op = call.operation("delete", resource)
    del call.project.compute[call.key]
    return op


_OUTPUT_ONLY = ("kind", "id", "selfLink", "creationTimestamp", "name", "zone", "region")


def patch(call: Call, kind: Kind, replace: bool = False, merged: bool = False) -> Resource:
    """PUT (`replace`), PATCH as a JSON merge patch (`merged`: what Google documents for autoscalers, so a
    scaling schedule left out of the body stays), or PATCH replacing the top-level fields given."""
    resource = call.get()
    body = copy.deepcopy(require_body(call.body))
    check_fingerprint(call, kind.schema, resource, body)
    if body.get("name", resource["name"]) != resource["name"]:
        raise invalid(f"Invalid value for field 'resource.name': '{body['name']}'. The name cannot change.")
    given = set(body)
    kind.refs(body, resolver(call))
    body = {k: v for k, v in body.items() if k in given or v is not None}  # a field left out of a PATCH stays
    kept = {k: v for k, v in resource.items() if k in _OUTPUT_ONLY or k.startswith("_")}
    if replace or merged:
        body = merge(resource, body) if merged else body
        resource.clear()
        resource.update(body)
    else:  # fields given replace the stored ones (Google's merge for these resources)
        resource.update(body)
    resource.update(kept)
    if kind.prepare:
        kind.prepare(call, resource)
    return call.operation(call.method.verb, resource)


def check_fingerprint(call: Call, schema: str, resource: Resource, body: Resource) -> None:
    """A resource whose schema carries `fingerprint` is changed only by a caller that read its current one
    (rules compute.fingerprint-*): absent or stale, Google answers 412 conditionNotMet."""
    guarded = "fingerprint" in call.schemas[schema]["properties"] and "fingerprint" in resource
    if guarded and body.get("fingerprint") != resource["fingerprint"]:
        raise condition_not_met("Invalid fingerprint.")


def merge(target: Any, change: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(change, dict):
        return copy.deepcopy(change)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in change.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def register(method_resource: str, kind: Kind, verbs: tuple[str, ...]) -> None:
    prefix = f"compute.{method_resource}."
    table: dict[str, Handler] = {
        "insert": lambda c: insert(c, kind),
        "get": get,
        "list": list_,
        "delete": lambda c: delete(c, kind),
        "patch": lambda c: patch(c, kind),
        "merge_patch": lambda c: patch(c, kind, merged=True),
        "update": lambda c: patch(c, kind, replace=True),
    }
    for verb in verbs:  # "merge_patch" serves `patch` with merge semantics
        HANDLERS[prefix + verb.replace("merge_patch", "patch")] = table[verb]


def handler(method_id: str) -> Callable[[Handler], Handler]:
    def wrap(fn: Handler) -> Handler:
        HANDLERS[method_id] = fn
        return fn

    return wrap
