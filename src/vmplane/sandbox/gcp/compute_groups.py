"""Instance templates (global and regional), unmanaged zonal instance groups, regional managed instance
groups (MIGs); their autoscalers are in compute_autoscalers.py.

A MIG makes `targetSize` instances named `<baseInstanceName>-<4 random [a-z0-9]>`, round-robin over its
distributionPolicy zones, from its template's properties. A PROACTIVE update replaces every instance at
once (Google honours maxSurge/maxUnavailable one by one; the end state is the same).
"""

from __future__ import annotations

import copy
import secrets
import string

from vmplane.sandbox.gcp import operations
from vmplane.sandbox.gcp.compute import Call, Hook, Kind, Resolve, check_unused, handler, key_of, register
from vmplane.sandbox.gcp.compute_catalogue import REGIONS
from vmplane.sandbox.gcp.compute_instances import check_properties, create_instance, nic_refs, running
from vmplane.sandbox.gcp.errors import invalid, not_found
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import Resource, fingerprint, parse_ref, self_link


def _template_refs(r: Resource, ref: Resolve) -> None:
    nic_refs(r.get("properties") or {}, ref, "resource.properties")


def _template_prepare(call: Call, r: Resource) -> None:
    props = r.get("properties")
    if not isinstance(props, dict):
        raise invalid("Invalid value for field 'resource.properties': ''. Instance template properties are required.")
    check_properties(call.state, call.project, props, "resource.properties")
    props.setdefault("metadata", {}).setdefault("items", [])
    props["metadata"].setdefault("kind", "compute#metadata")


_TEMPLATE = Kind("instanceTemplates", "InstanceTemplate", "instance template", _template_refs, _template_prepare)
for _res in ("instanceTemplates", "regionInstanceTemplates"):
    register(_res, _TEMPLATE, ("insert", "get", "list", "delete"))


# Unmanaged zonal groups: members live in `_members` (Google lists them only through listInstances).
def _group_refs(r: Resource, ref: Resolve) -> None:
    if r.get("network"):
        r["network"] = ref("resource.network", r["network"], ("networks",))


def _group_prepare(call: Call, r: Resource) -> None:
    r.setdefault("_members", [])
    r["size"] = len(r["_members"])
    r.setdefault("fingerprint", fingerprint())
    r.setdefault("namedPorts", [])


register(
    "instanceGroups",
    Kind("instanceGroups", "InstanceGroup", "instance group", _group_refs, _group_prepare),
    ("insert", "get", "list", "delete"),
)
register("regionInstanceGroups", _TEMPLATE, ("list",))


def _members_of(call: Call, body: Resource) -> list[str]:
    links = []
    for i, item in enumerate(body.get("instances", [])):
        project, key = parse_ref(item.get("instance", ""), call.project.id, f"instances[{i}].instance")
        if key not in call.state.project(project).compute:
            raise not_found(f"projects/{project}/{key}")
        if not key.startswith(call.scope + "/"):
            raise invalid(f"Invalid value for field 'instances[{i}].instance': the instance is not in {call.scope}.")
        links.append(self_link(project, key))
    return links


@handler("compute.instanceGroups.addInstances")
def _add(call: Call) -> Resource:
    group = call.get()
    for link in _members_of(call, require_body(call.body)):
        if link in group["_members"]:
            raise invalid(f"Invalid value for field 'instances': '{link}' is already a member of the group.")
        group["_members"].append(link)
    group["size"] = len(group["_members"])
    return call.operation("addInstances", group)


@handler("compute.instanceGroups.removeInstances")
def _remove(call: Call) -> Resource:
    group = call.get()
    for link in _members_of(call, require_body(call.body)):
        if link in group["_members"]:
            group["_members"].remove(link)
    group["size"] = len(group["_members"])
    return call.operation("removeInstances", group)


@handler("compute.instanceGroups.listInstances")
def _list_instances(call: Call) -> Resource:
    group = call.get()
    items = [{"instance": link, "status": _instance(call, link).get("status", "RUNNING")} for link in group["_members"]]
    return {"kind": "compute#instanceGroupsListInstances", "id": group["selfLink"], "items": items}


@handler("compute.instanceGroups.setNamedPorts")
def _named_ports(call: Call) -> Resource:
    group = call.get()
    body = require_body(call.body)
    if body.get("fingerprint") not in (None, group["fingerprint"]):
        from vmplane.sandbox.gcp.errors import condition_not_met

        raise condition_not_met("Supplied fingerprint does not match current instance group fingerprint.")
    group.update(namedPorts=body.get("namedPorts", []), fingerprint=fingerprint())
    return call.operation("setNamedPorts", group)


def _instance(call: Call, link: str) -> Resource:
    return call.project.compute.get(key_of({"selfLink": link}), {})


# Regional managed instance groups.
def _mig_refs(r: Resource, ref: Resolve) -> None:
    if r.get("instanceTemplate"):
        r["instanceTemplate"] = ref("resource.instanceTemplate", r["instanceTemplate"], ("instanceTemplates",))
    for i, version in enumerate(r.get("versions") or []):
        where = f"resource.versions[{i}].instanceTemplate"
        version["instanceTemplate"] = ref(where, version.get("instanceTemplate"), ("instanceTemplates",))
    if "autoHealingPolicies" in r:
        r["autoHealingPolicies"] = _autohealing(r["autoHealingPolicies"], ref)


MAX_INITIAL_DELAY_SEC = 3600  # compute.v1 InstanceGroupManagerAutoHealingPolicy: "between 0 and 3600 seconds"


def _autohealing(policies: object, ref: Resolve) -> list[Resource]:
    """As Google checks them: one policy at most ("You can specify only one value"), its health check an
    existing (global or regional) health check, initialDelaySec an integer within 0..3600. A policy
    naming neither turns health-check autohealing off (gcloud's --clear-autohealing sends one): none
    is kept."""
    field = "resource.autoHealingPolicies"
    if not isinstance(policies, list) or len(policies) > 1:
        raise invalid(f"Invalid value for field '{field}': only one autohealing policy can be specified.")
    out = []
    for i, policy in enumerate(policies):
        if not isinstance(policy, dict):
            raise invalid(f"Invalid value for field '{field}[{i}]': '{policy}'.")
        delay = policy.get("initialDelaySec")
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_INITIAL_DELAY_SEC
        ):
            raise invalid(
                f"Invalid value for field '{field}[{i}].initialDelaySec': '{delay}'. "
                f"Must be between 0 and {MAX_INITIAL_DELAY_SEC}."
            )
        if policy.get("healthCheck") is None and delay is None:
            continue
        healed = dict(policy)
        healed["healthCheck"] = ref(f"{field}[{i}].healthCheck", policy.get("healthCheck"), ("healthChecks",))
        out.append({k: v for k, v in healed.items() if v is not None})
    return out


def template_of(mig: Resource) -> str:
    versions = mig.get("versions") or []
    return str(versions[0]["instanceTemplate"] if versions else mig["instanceTemplate"])


def _mig_prepare(call: Call, r: Resource) -> None:
    if not r.get("instanceTemplate") and not r.get("versions"):
        raise invalid("Invalid value for field 'resource.instanceTemplate': ''. An instance template is required.")
    if not r.get("baseInstanceName"):
        raise invalid("Invalid value for field 'resource.baseInstanceName': ''. baseInstanceName is required.")
    r.setdefault("versions", [{"instanceTemplate": r.get("instanceTemplate")}])
    r["instanceTemplate"] = template_of(r)
    region = call.params["region"]
    zones = r.setdefault("distributionPolicy", {}).setdefault(
        "zones", [{"zone": self_link(call.project.id, f"zones/{region}-{z}")} for z in REGIONS.get(region, ())]
    )
    for i, z in enumerate(zones):
        name = str(z.get("zone", "")).rsplit("/", 1)[-1]
        if not name.startswith(region + "-") or name[len(region) + 1 :] not in REGIONS.get(region, ()):
            raise invalid(f"Invalid value for field 'resource.distributionPolicy.zones[{i}].zone': '{z.get('zone')}'.")
        z["zone"] = self_link(call.project.id, f"zones/{name}")
    r["distributionPolicy"].setdefault("targetShape", "EVEN")
    r.setdefault("targetSize", 0)
    r.setdefault("updatePolicy", {"type": "OPPORTUNISTIC", "minimalAction": "REPLACE"})
    r.setdefault("fingerprint", fingerprint())
    r["instanceGroup"] = self_link(call.project.id, f"regions/{region}/instanceGroups/{r['name']}")
    r["currentActions"] = {
        "none": 0,
        "creating": 0,
        "deleting": 0,
        "recreating": 0,
        "refreshing": 0,
        "restarting": 0,
        "abandoning": 0,
        "verifying": 0,
    }
    r["status"] = {"isStable": True, "versionTarget": {"isReached": True}}


def members(call: Call, mig: Resource) -> list[Resource]:
    return [r for r in call.project.compute.values() if r.get("_mig") == mig["selfLink"]]


def _new_instance(call: Call, mig: Resource, name: str | None = None) -> Resource:
    template = call.project.compute[key_of({"selfLink": template_of(mig)})]
    zones = [z["zone"].rsplit("/", 1)[1] for z in mig["distributionPolicy"]["zones"]]
    counts = {z: 0 for z in zones}
    for r in members(call, mig):
        counts[r["zone"].rsplit("/", 1)[1]] = counts.get(r["zone"].rsplit("/", 1)[1], 0) + 1
    zone = min(zones, key=lambda z: counts[z])
    alphabet = string.ascii_lowercase + string.digits
    while name is None or any(r["name"] == name for r in members(call, mig)):
        name = f"{mig['baseInstanceName']}-{''.join(secrets.choice(alphabet) for _ in range(4))}"
    body = copy.deepcopy(template["properties"])
    body["name"] = name
    body.pop("kind", None)
    items = body.setdefault("metadata", {}).setdefault("items", [])
    region = mig["region"].rsplit("/", 1)[1]
    items += [
        {"key": "instance-template", "value": template["selfLink"].split("/compute/v1/", 1)[1]},
        {
            "key": "created-by",
            "value": f"projects/{call.project.number}/regions/{region}/instanceGroupManagers/{mig['name']}",
        },
    ]
    instance = create_instance(call, zone, body)
    instance.update(_mig=mig["selfLink"], _template=template["selfLink"])
    return instance


def _sync(call: Call, mig: Resource) -> None:
    """The MIG's instances match targetSize (added or the newest removed) and its group shows them."""
    have = members(call, mig)
    for _ in range(int(mig["targetSize"]) - len(have)):
        _new_instance(call, mig)
    for extra in sorted(have, key=lambda r: r["creationTimestamp"])[int(mig["targetSize"]) :]:
        del call.project.compute[key_of(extra)]
    group_key = key_of({"selfLink": mig["instanceGroup"]})
    group = call.project.compute.setdefault(
        group_key,
        {
            "kind": "compute#instanceGroup",
            "id": call.state.new_id(),
            "name": mig["name"],
            "creationTimestamp": mig["creationTimestamp"],
            "selfLink": mig["instanceGroup"],
            "region": mig["region"],
            "fingerprint": fingerprint(),
        },
    )
    group.update(size=len(members(call, mig)), namedPorts=mig.get("namedPorts", []))
    mig["currentActions"]["none"] = len(members(call, mig))


def _start_all(call: Call, mig: Resource) -> Hook:
    state = call.state
    pending = [r for r in members(call, mig) if r["status"] == "PROVISIONING"]

    def start() -> None:
        for r in pending:
            running(state, r)

    return start


def _mig_created(call: Call, mig: Resource) -> Hook:
    _sync(call, mig)
    return _start_all(call, mig)


def _mig_deleting(call: Call, mig: Resource) -> None:
    check_unused(call.project, mig["instanceGroup"], "instance group")
    for r in members(call, mig):
        del call.project.compute[key_of(r)]
    call.project.compute.pop(key_of({"selfLink": mig["instanceGroup"]}), None)


_MIG = Kind(
    "instanceGroupManagers",
    "InstanceGroupManager",
    "instance group manager",
    _mig_refs,
    _mig_prepare,
    _mig_created,
    _mig_deleting,
)
register("regionInstanceGroupManagers", _MIG, ("insert", "get", "list", "delete"))


def _replace_all(call: Call, mig: Resource) -> None:
    for r in members(call, mig):
        if r["_template"] != template_of(mig):
            del call.project.compute[key_of(r)]
            _new_instance(call, mig)


def _mig_op(call: Call, mig: Resource, op_type: str) -> Resource:
    _sync(call, mig)
    return call.operation(op_type, mig, done=_start_all(call, mig))


@handler("compute.regionInstanceGroupManagers.get")
def _mig_get(call: Call) -> Resource:
    mig = call.get()
    operations.finish_for(call.state, call.project, mig["selfLink"])
    from vmplane.sandbox.gcp.store import public

    return public(mig)


@handler("compute.regionInstanceGroupManagers.resize")
def _resize(call: Call) -> Resource:
    mig = call.get()
    if call.query["size"] < 0:
        raise invalid(f"Invalid value for field 'size': '{call.query['size']}'. Must be greater than or equal to 0")
    mig["targetSize"] = call.query["size"]
    return _mig_op(call, mig, "compute.instanceGroupManagers.resize")


@handler("compute.regionInstanceGroupManagers.patch")
def _mig_patch(call: Call) -> Resource:
    mig = call.get()
    body = copy.deepcopy(require_body(call.body))
    from vmplane.sandbox.gcp.compute import check_fingerprint, resolver

    check_fingerprint(call, "InstanceGroupManager", mig, body)

    _mig_refs(body, resolver(call))
    for k, v in body.items():
        if k not in ("name", "id", "selfLink", "kind", "region", "instanceGroup", "creationTimestamp"):
            mig[k] = v
    if "versions" in body:
        mig["instanceTemplate"] = template_of(mig)
    elif "instanceTemplate" in body:
        mig["versions"] = [{"instanceTemplate": mig["instanceTemplate"]}]
    mig["fingerprint"] = fingerprint()
    if mig.get("updatePolicy", {}).get("type") == "PROACTIVE":  # bring every outdated instance to the version
        _replace_all(call, mig)
    return _mig_op(call, mig, "compute.instanceGroupManagers.patch")


@handler("compute.regionInstanceGroupManagers.setInstanceTemplate")
def _set_template(call: Call) -> Resource:
    """Only instances made from now on use it, as with Google (patch PROACTIVE or recreateInstances replace)."""
    mig = call.get()
    from vmplane.sandbox.gcp.compute import resolver

    link = resolver(call)("instanceTemplate", require_body(call.body).get("instanceTemplate"), ("instanceTemplates",))
    mig.update(instanceTemplate=link, versions=[{"instanceTemplate": link}], fingerprint=fingerprint())
    return _mig_op(call, mig, "compute.instanceGroupManagers.setInstanceTemplate")


def _named(call: Call, mig: Resource) -> list[Resource]:
    wanted = {parse_ref(i, call.project.id, "instances")[1] for i in require_body(call.body).get("instances", [])}
    found = [r for r in members(call, mig) if key_of(r) in wanted]
    if len(found) != len(wanted):
        raise invalid("Invalid value for field 'instances': an instance is not a member of the group.")
    return found


@handler("compute.regionInstanceGroupManagers.recreateInstances")
def _recreate(call: Call) -> Resource:
    mig = call.get()
    for r in _named(call, mig):
        del call.project.compute[key_of(r)]
        _new_instance(call, mig, name=r["name"])  # recreate keeps the name, takes the current template
    return _mig_op(call, mig, "compute.instanceGroupManagers.recreateInstances")


@handler("compute.regionInstanceGroupManagers.deleteInstances")
def _delete_instances(call: Call) -> Resource:
    mig = call.get()
    for r in _named(call, mig):
        del call.project.compute[key_of(r)]
        mig["targetSize"] = int(mig["targetSize"]) - 1
    return _mig_op(call, mig, "compute.instanceGroupManagers.deleteInstances")


@handler("compute.regionInstanceGroupManagers.listManagedInstances")
def _managed(call: Call) -> Resource:
    mig = call.get()
    operations.finish_for(call.state, call.project, mig["selfLink"])
    items = [
        {
            "instance": r["selfLink"],
            "id": r["id"],
            "name": r["name"],
            "instanceStatus": r["status"],
            "currentAction": "NONE",
            "version": {"instanceTemplate": r["_template"]},
        }
        for r in members(call, mig)
    ]
    return {"managedInstances": items}
