"""Regional instance groups: Google's view of a regional MIG under the same name (there is no other
kind), so the backend service can reference it and its named ports can be set."""

from __future__ import annotations

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.compute_groups import members
from vmplane.sandbox.gcp.errors import condition_not_met
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, fingerprint


def _region_group(call: Call) -> tuple[Resource, Resource]:
    """A regional instance group is the view of the MIG of the same name (Google has no other kind)."""
    mig = call.get(f"{call.scope}/instanceGroupManagers/{call.name}")
    view = {
        "kind": "compute#instanceGroup",
        "id": mig["id"],
        "creationTimestamp": mig["creationTimestamp"],
        "name": mig["name"],
        "region": mig["region"],
        "selfLink": mig["instanceGroup"],
        "namedPorts": mig.get("namedPorts", []),
        "fingerprint": mig["fingerprint"],
        "size": len(members(call, mig)),
    }
    return mig, view


@handler("compute.regionInstanceGroups.get")
def _region_group_get(call: Call) -> Resource:
    return _region_group(call)[1]


@handler("compute.regionInstanceGroups.setNamedPorts")
def _region_named_ports(call: Call) -> Resource:
    mig, view = _region_group(call)
    body = require_body(call.body)
    if body.get("fingerprint") not in (None, mig["fingerprint"]):
        raise condition_not_met("Supplied fingerprint does not match current instance group fingerprint.")
    mig.update(namedPorts=body.get("namedPorts", []), fingerprint=fingerprint())
    return call.operation("setNamedPorts", view)
