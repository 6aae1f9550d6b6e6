"""Cloud DNS v1: managed zones (list/get, the seeded one and any created), changes (create/get/list) and
record sets (list/get). A deletion must match an existing record set exactly; an addition of an existing
name and type is a 409, as with Google. A change is `pending` when created and `done` when next read."""

from __future__ import annotations

import copy
import re

from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import ApiError, already_exists, condition_not_met, invalid, not_found
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Project, Resource, now

_LABEL = re.compile(r"(?:\*|[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9])?)")


def _zone(call: Call) -> tuple[Project, Resource]:
    project = call.project
    zone = project.dns_zones.get(call.params["managedZone"])
    if zone is None:
        raise not_found(f"projects/{project.id}/managedZones/{call.params['managedZone']}")
    return project, zone


@handler("dns.managedZones.list")
def _zones_list(call: Call) -> Resource:
    wanted = call.query.get("dnsName")
    if wanted and not wanted.endswith("."):
        wanted += "."
    zones = [z for z in call.project.dns_zones.values() if not wanted or z["dnsName"] == wanted]
    return {"kind": "dns#managedZonesListResponse", "managedZones": zones}


@handler("dns.managedZones.get")
def _zones_get(call: Call) -> Resource:
    return _zone(call)[1]


def _check_rrset(zone: Resource, rrset: Resource, where: str) -> tuple[str, str]:
    name, kind = rrset.get("name", ""), rrset.get("type", "")
    if not name.endswith(".") or not all(_LABEL.fullmatch(p) for p in name[:-1].split(".")):
        raise invalid(f"Invalid value for '{where}.name': '{name}'")
    if name != zone["dnsName"] and not name.endswith("." + zone["dnsName"]):
        raise ApiError(
            400, "invalid", f"The resource '{where}' named '{name} ({kind})' is not in zone {zone['dnsName']}."
        )
    if not kind or not rrset.get("rrdatas"):
        raise invalid(f"Invalid value for '{where}': a type and rrdatas are required.")
    return name, kind


@handler("dns.changes.create")
def _change(call: Call) -> Resource:
    project, zone = _zone(call)
    body = require_body(call.body, "change")
    records = project.dns_records[zone["name"]]
    after = dict(records)
    for i, rrset in enumerate(body.get("deletions", [])):
        where = f"entity.change.deletions[{i}]"
        key = _check_rrset(zone, rrset, where)
        current = after.get(key)
        if current is None:
            raise not_found(f"{where}' named '{key[0]} ({key[1]})")
        if {k: current.get(k) for k in ("ttl", "rrdatas")} != {
            "ttl": rrset.get("ttl", current["ttl"]),
            "rrdatas": rrset["rrdatas"],
        }:
            raise condition_not_met(f"Precondition not met for '{where}'")
        del after[key]
    for i, rrset in enumerate(body.get("additions", [])):
        where = f"entity.change.additions[{i}]"
        key = _check_rrset(zone, rrset, where)
        if key in after:
            raise already_exists(f"{where}' named '{key[0]} ({key[1]})")
        after[key] = {"kind": "dns#resourceRecordSet", "ttl": 300, **copy.deepcopy(rrset)}
    records.clear()
    records.update(after)
    changes = project.dns_changes.setdefault(zone["name"], {})
    change_id = str(len(changes) + 1)
    change = {
        "kind": "dns#change",
        "id": change_id,
        "status": "pending",
        "startTime": now(),
        "additions": [after[(r["name"], r["type"])] for r in body.get("additions", [])],
        "deletions": body.get("deletions", []),
    }
    changes[change_id] = change
    return dict(change)


@handler("dns.changes.get")
def _change_get(call: Call) -> Resource:
    project, zone = _zone(call)
    change = project.dns_changes.get(zone["name"], {}).get(call.params["changeId"])
    if change is None:
        raise not_found(f"projects/{project.id}/managedZones/{zone['name']}/changes/{call.params['changeId']}")
    change["status"] = "done"  # Cloud DNS applies a change within seconds; the next read sees it done
    return change


@handler("dns.changes.list")
def _changes_list(call: Call) -> Resource:
    project, zone = _zone(call)
    return {"kind": "dns#changesListResponse", "changes": list(project.dns_changes.get(zone["name"], {}).values())}


@handler("dns.resourceRecordSets.list")
def _rrsets(call: Call) -> Resource:
    project, zone = _zone(call)
    name, kind = call.query.get("name"), call.query.get("type")
    found = [
        r
        for (n, t), r in sorted(project.dns_records[zone["name"]].items())
        if (not name or n == name) and (not kind or t == kind)
    ]
    return {"kind": "dns#resourceRecordSetsListResponse", "rrsets": found}


@handler("dns.resourceRecordSets.get")
def _rrset_get(call: Call) -> Resource:
    project, zone = _zone(call)
    found = project.dns_records[zone["name"]].get((call.params["name"], call.params["type"]))
    if found is None:
        raise not_found(
            f"projects/{project.id}/managedZones/{zone['name']}/rrsets/{call.params['name']}/{call.params['type']}"
        )
    return found
