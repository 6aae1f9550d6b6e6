"""A change of the spec's `tags` applied in place (the contract of clouds/aws/retag.py): every resource
of the job that can take the new tag set in place gets it, and user tags removed from the file go.

- Labels (`setLabels`, which replaces the whole map, so removed keys go): VM instances, the global
  forwarding rules and the global address. The label fingerprint read is sent back, so a concurrent
  change makes Google refuse ours rather than be overwritten.
- Descriptions (the full tag set as JSON), by `patch` where the description is mutable: firewall rules,
  backend services, Cloud Routers.
- Left as they are, because the API cannot change them in place: networks, subnetworks, instance
  templates (immutable: the next template version carries the new tags), health checks, URL maps,
  target proxies, SSL certificates, instance groups, MIGs and autoscalers. vmplane reads only the job id
  from a description, which a tag change never alters, so ownership stays exact.
- The service account's description, by IAM's `serviceAccounts.patch` (`updateMask=description`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.gcp import identity, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.inventory import is_ours, named_like
from vmplane.clouds.gcp.operations import last_segment, patch_current, run
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients, new_request_id
from vmplane.clouds.tags import gcp_label_key

# (compute client, collection, scope, role used when the resource records none)
_LABELLED = [
    ("Instances", "instances", "zone", "vm"),
    ("GlobalForwardingRules", "globalForwardingRules", "global", "lb"),
    ("GlobalAddresses", "globalAddresses", "global", "lb"),
]
_DESCRIBED = [
    ("Firewalls", "firewalls", "global", "firewall"),
    ("BackendServices", "backendServices", "global", "lb"),
    ("Routers", "routers", "region", "router"),
]


def _role(resource: Any, ctx: Context, default: str) -> str:
    """The role the resource was tagged with (kept: only the user's tags change)."""
    t = ctx.tagger
    labels = dict(getattr(resource, "labels", None) or {})
    return ownership.tags_of(resource).get(t.role_key) or labels.get(gcp_label_key(t.role_key)) or default


def retag(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    project, region, count = gcp.project, ctx.spec.provider.region, 0
    for client, collection, scope, default in _LABELLED:
        api = gcp.compute(client)
        for r in named_like(gcp, ctx, client, collection, scope):
            if not is_ours(r, ctx.tagger):
                continue
            labels = ownership.labels(ctx.tagger, _role(r, ctx, default))
            count += 1
            if dict(r.labels) == labels:
                continue
            request: dict[str, Any] = {"project": project, "request_id": new_request_id()}
            if scope == "zone":
                body = compute_v1.InstancesSetLabelsRequest(labels=labels, label_fingerprint=r.label_fingerprint)
                request |= {"zone": last_segment(r.zone), "instance": r.name}
                request["instances_set_labels_request_resource"] = body
            else:
                req = compute_v1.GlobalSetLabelsRequest(labels=labels, label_fingerprint=r.label_fingerprint)
                request |= {"resource": r.name, "global_set_labels_request_resource": req}
            call = partial(api.set_labels_unary, request=request, timeout=CALL_TIMEOUT)
            run(gcp, f"compute.{collection}.setLabels", call, what=f"labels of {r.name}")
    for client, collection, scope, default in _DESCRIBED:
        api = gcp.compute(client)
        for r in named_like(gcp, ctx, client, collection, scope):
            if not is_ours(r, ctx.tagger):
                continue
            description = ownership.description(ctx.tagger, _role(r, ctx, default))
            count += 1
            if r.description == description:
                continue
            # The resource as read, description changed: PATCH validates the body as a whole resource
            # (required fields, the network reference), and the fingerprint guards a concurrent edit.
            body = type(r).deserialize(type(r).serialize(r))
            body.description = description
            if collection == "backendServices":  # fingerprinted: read-modify-write, one retry on a 412 race
                _patch_backend_service(gcp, api, r.name, description)
                continue
            fields: dict[str, Any] = {"project": project, "request_id": new_request_id()}
            if collection == "firewalls":
                fields |= {"firewall": r.name, "firewall_resource": body}
            elif collection == "backendServices":
                fields |= {"backend_service": r.name, "backend_service_resource": body}
            else:
                fields |= {"region": region, "router": r.name, "router_resource": body}
            patch = partial(api.patch_unary, request=fields, timeout=CALL_TIMEOUT)
            run(gcp, f"compute.{collection}.patch", patch, what=f"description of {r.name}")
    count += _retag_service_account(gcp, ctx)
    ctx.log(f"tags updated on {count} resources: {', '.join(sorted(ctx.spec.tags)) or 'no user tags'}")


def _patch_backend_service(gcp: GcpClients, api: Any, name: str, description: str) -> None:
    get = partial(api.get, project=gcp.project, backend_service=name, timeout=CALL_TIMEOUT)

    def send(fingerprint: str, request_id: str) -> Any:
        body = gcp.call("compute.backendServices.get", get)  # the whole resource: PATCH validates all of it
        body.description, body.fingerprint = description, fingerprint
        request = {"project": gcp.project, "backend_service": name, "backend_service_resource": body}
        return api.patch_unary(request={**request, "request_id": request_id}, timeout=CALL_TIMEOUT)

    patch_current(gcp, "compute.backendServices.patch", get, send, what=f"description of {name}")


def _retag_service_account(gcp: GcpClients, ctx: Context) -> int:
    """1 if the job's service account carries the current tag set (patched if it did not), else 0."""
    email = gcp_ids(ctx.infra).ServiceAccountEmail
    account = identity.get_account(gcp, email) if email else None
    if account is None or not ownership.owned_by(account, ctx.tagger):
        return 0
    wanted = identity.sa_description(ctx.tagger)
    if account.get("description") != wanted:
        sas = gcp.iam.projects().serviceAccounts()
        body = {"serviceAccount": {"description": wanted}, "updateMask": "description"}
        name = identity.sa_resource(gcp.project, account["email"])
        gcp.call("iam.projects.serviceAccounts.patch", lambda: sas.patch(name=name, body=body).execute())
    return 1
