"""Instances: private NICs with an address from the subnetwork, fingerprinted labels/metadata/tags,
PROVISIONING -> RUNNING when the insert completes, stop/start, and guest attributes (guest.py)."""

from __future__ import annotations

import copy

from vmplane.sandbox.gcp import guest, operations
from vmplane.sandbox.gcp.compute import Call, Hook, Kind, Resolve, handler, insert, register, resolver, set_labels
from vmplane.sandbox.gcp.compute_catalogue import MACHINE_TYPES, default_service_account, known_image
from vmplane.sandbox.gcp.compute_network import allocate_ip
from vmplane.sandbox.gcp.errors import condition_not_met, invalid
from vmplane.sandbox.gcp.schema import require_body
from vmplane.sandbox.gcp.store import (
    Project,
    Resource,
    State,
    check_labels,
    fingerprint,
    now,
    parse_ref,
    public,
    self_link,
)


def nic_refs(r: Resource, ref: Resolve, where: str = "resource") -> None:
    for i, nic in enumerate(r.get("networkInterfaces", [])):
        nic["network"] = ref(f"{where}.networkInterfaces[{i}].network", nic.get("network"), ("networks",))
        nic["subnetwork"] = ref(f"{where}.networkInterfaces[{i}].subnetwork", nic.get("subnetwork"), ("subnetworks",))
        if nic["network"] is None:
            nic.pop("network")
        if nic["subnetwork"] is None:
            nic.pop("subnetwork")


def check_properties(state: State, project: Project, r: Resource, where: str) -> None:
    """What an instance and a template's properties share: machine type, images, service accounts."""
    machine = str(r.get("machineType", "")).rsplit("/", 1)[-1]
    if machine not in MACHINE_TYPES:
        raise invalid(f"Invalid value for field '{where}.machineType': '{r.get('machineType')}'. Unknown machine type.")
    for i, disk in enumerate(r.get("disks", [])):
        image = disk.get("initializeParams", {}).get("sourceImage")
        if image and not known_image(image):
            raise invalid(
                f"Invalid value for field '{where}.disks[{i}].initializeParams.sourceImage': '{image}'. "
                "The referenced image resource cannot be found."
            )
    for i, account in enumerate(r.get("serviceAccounts", [])):
        email = account.get("email", "default")
        known = email in ("default", default_service_account(project.number)) or any(
            email in p.service_accounts for p in state.projects.values()
        )
        if not known:
            raise invalid(
                f"Invalid value for field '{where}.serviceAccounts[{i}].email': '{email}'. "
                "The user does not have access to service account '{email}'. User: 'sandbox@vmplane.test'.".replace(
                    "'{email}'", f"'{email}'"
                )
            )
    check_labels(r.get("labels"), f"{where}.labels")
    for i, nic in enumerate(r.get("networkInterfaces", [])):
        if "network" not in nic and "subnetwork" not in nic:
            raise invalid(
                f"Invalid value for field '{where}.networkInterfaces[{i}]': a network or subnetwork is required."
            )


def _fill(call: Call, r: Resource) -> None:
    project = call.project
    zone = r["zone"].rsplit("/", 1)[1]
    region = zone.rsplit("-", 1)[0]
    check_properties(call.state, project, r, "resource")
    r["machineType"] = self_link(project.id, f"zones/{zone}/machineTypes/{r['machineType'].rsplit('/', 1)[-1]}")
    for i, nic in enumerate(r.get("networkInterfaces", [])):
        subnet_link = nic.get("subnetwork") or _subnet_in(project, nic["network"], region)
        subnet = project.compute[subnet_link.split(f"/projects/{project.id}/", 1)[1]]
        if f"/regions/{region}/" not in subnet_link:
            raise invalid(
                f"Invalid value for field 'resource.networkInterfaces[{i}].subnetwork': '{subnet_link}'. "
                f"The subnetwork is not in region {region}."
            )
        nic.update(
            kind="compute#networkInterface",
            name=f"nic{i}",
            subnetwork=subnet_link,
            network=nic.get("network") or subnet["network"],
            networkIP=nic.get("networkIP") or allocate_ip(subnet),
            fingerprint=fingerprint(),
            stackType="IPV4_ONLY",
        )
    disks = []
    for i, disk in enumerate(r.get("disks", [])):
        init = disk.get("initializeParams", {})
        device = disk.get("deviceName") or (r["name"] if i == 0 else f"{r['name']}-{i}")
        out = {k: v for k, v in disk.items() if k != "initializeParams"}
        out.update(
            kind="compute#attachedDisk",
            index=i,
            boot=disk.get("boot", i == 0),
            autoDelete=disk.get("autoDelete", False),
            deviceName=device,
            mode=disk.get("mode", "READ_WRITE"),
            type=disk.get("type", "PERSISTENT"),
            interface=disk.get("interface", "SCSI"),
            source=self_link(project.id, f"zones/{zone}/disks/{device}"),
            diskSizeGb=str(init.get("diskSizeGb", "10")),
        )
        disks.append(out)
    r["disks"] = disks
    metadata = r.get("metadata") or {}
    r["metadata"] = {"kind": "compute#metadata", "fingerprint": fingerprint(), "items": metadata.get("items", [])}
    r["tags"] = {"items": (r.get("tags") or {}).get("items", []), "fingerprint": fingerprint()}
    r["serviceAccounts"] = [
        {
            **a,
            "email": default_service_account(project.number) if a.get("email", "default") == "default" else a["email"],
        }
        for a in r.get("serviceAccounts", [])
    ]
    r.update(
        status="PROVISIONING",
        cpuPlatform="Intel Broadwell",
        startRestricted=False,
        deletionProtection=r.get("deletionProtection", False),
        fingerprint=fingerprint(),
    )
    r.setdefault("scheduling", {"onHostMaintenance": "MIGRATE", "automaticRestart": True, "preemptible": False})


def _subnet_in(project: Project, network: str, region: str) -> str:
    for other in project.compute.values():
        if (
            other.get("kind") == "compute#subnetwork"
            and other["network"] == network
            and f"/regions/{region}/" in other["selfLink"]
        ):
            return str(other["selfLink"])
    raise invalid(
        f"Invalid value for field 'resource.networkInterfaces[0].network': '{network}'. "
        f"The network has no subnetwork in region {region}."
    )


def running(state: State, instance: Resource) -> None:
    if instance.get("status") in ("PROVISIONING", "STAGING"):
        instance.update(status="RUNNING", lastStartTimestamp=now())
        guest.on_running(state, instance)


def _created(call: Call, r: Resource) -> Hook:
    state = call.state
    return lambda: running(state, r)


def create_instance(call: Call, zone: str, body: Resource) -> Resource:
    """An instance made by the sandbox itself (a MIG's): stored at once; RUNNING when the caller's op completes."""
    r = copy.deepcopy(body)
    r.update(
        kind="compute#instance",
        id=call.state.new_id(),
        creationTimestamp=now(),
        selfLink=self_link(call.project.id, f"zones/{zone}/instances/{r['name']}"),
        zone=self_link(call.project.id, f"zones/{zone}"),
        labels=r.get("labels") or {},
    )
    nic_refs(r, resolver(call))
    from vmplane.sandbox.gcp.compute import fingerprint_of

    r["labelFingerprint"] = fingerprint_of(r["labels"])
    _fill(call, r)
    call.project.compute[f"zones/{zone}/instances/{r['name']}"] = r
    return r


def _deleting(call: Call, r: Resource) -> None:
    for group in call.project.compute.values():
        if r["selfLink"] in group.get("_members", []):
            group["_members"].remove(r["selfLink"])
            group["size"] = len(group["_members"])


INSTANCES = Kind(
    "instances", "Instance", "instance", refs=nic_refs, prepare=_fill, created=_created, deleting=_deleting
)
register("instances", INSTANCES, ("get", "list", "delete"))


@handler("compute.instances.insert")
def _insert(call: Call) -> Resource:
    """`?sourceInstanceTemplate=` starts from the template's properties; fields in the body override them,
    as Google documents for instances.insert. Instance has no field naming its template: Google records it
    in the `instance-template` metadata item, and so does the sandbox."""
    source = call.query.get("sourceInstanceTemplate")
    if source:
        project, key = parse_ref(source, call.project.id, "sourceInstanceTemplate")
        template = call.state.project(project).compute.get(key)
        if template is None or template.get("kind") != "compute#instanceTemplate":
            raise invalid(
                f"Invalid value for field 'sourceInstanceTemplate': '{source}'. "
                "The referenced instanceTemplate resource cannot be found."
            )
        merged = copy.deepcopy(template["properties"])
        merged.pop("kind", None)
        merged.update(copy.deepcopy(require_body(call.body)))
        items = merged.setdefault("metadata", {}).setdefault("items", [])
        items.append({"key": "instance-template", "value": key_path(template)})
        call.body = merged
    op = insert(call, INSTANCES)
    return _quota(call, op)


CPUS_PER_REGION = 24  # the sandbox's regional CPUS quota (rule compute.quota-cpus-region)


def _quota(call: Call, op: Resource) -> Resource:
    """Google finds a quota exceeded while doing the insert: the operation fails, the instance is never made.
    TERMINATED instances hold no CPUs. A MIG's own instances count, but a MIG is never refused here."""
    zone = call.params["zone"]
    region = zone.rsplit("-", 1)[0]
    used = sum(
        MACHINE_TYPES[r["machineType"].rsplit("/", 1)[1]][0]
        for key, r in call.project.compute.items()
        if r.get("kind") == "compute#instance" and key.startswith(f"zones/{region}-") and r["status"] != "TERMINATED"
    )
    if used > CPUS_PER_REGION:
        message = f"Quota 'CPUS' exceeded.  Limit: {CPUS_PER_REGION:.1f} in region {region}."
        return operations.fail(call.state, op, "QUOTA_EXCEEDED", message, 403)
    return op


def key_path(resource: Resource) -> str:
    """`projects/p/regions/r/instanceTemplates/t` of a selfLink (what Google's metadata items carry)."""
    return str(resource["selfLink"]).split("/compute/v1/", 1)[1]


@handler("compute.instances.aggregatedList")
def _aggregated(call: Call) -> Resource:
    """Instances by zone, `filter` applied like list's (pagination is ignored, as in list)."""
    from vmplane.sandbox.gcp.filters import compile_filter

    matches = compile_filter(call.query.get("filter"))
    items: dict[str, Resource] = {}

    for key, r in sorted(call.project.compute.items()):
        if r.get("kind") == "compute#instance":
            operations.finish_for(call.state, call.project, r["selfLink"])  # reading completes, as in list
        if r.get("kind") != "compute#instance" or not matches(r):
            continue
        scope = "/".join(key.split("/")[:2])
        items.setdefault(scope, {"instances": []})["instances"].append(public(r))
    return {
        "kind": "compute#instanceAggregatedList",
        "id": f"projects/{call.project.id}/aggregated/instances",
        "items": items,
        "selfLink": self_link(call.project.id, "aggregated/instances"),
    }


handler("compute.instances.setLabels")(set_labels)


@handler("compute.instances.setMetadata")
def _set_metadata(call: Call) -> Resource:
    r = call.get()
    body = require_body(call.body)
    if body.get("fingerprint") != r["metadata"]["fingerprint"]:
        raise condition_not_met("Supplied fingerprint does not match current metadata fingerprint.")
    r["metadata"] = {"kind": "compute#metadata", "fingerprint": fingerprint(), "items": body.get("items", [])}
    guest.on_metadata(call.state, r)
    return call.operation("setMetadata", r)


@handler("compute.instances.setTags")
def _set_tags(call: Call) -> Resource:
    r = call.get()
    body = require_body(call.body)
    if body.get("fingerprint") != r["tags"]["fingerprint"]:
        raise condition_not_met("Supplied fingerprint does not match current tags fingerprint.")
    r["tags"] = {"items": body.get("items", []), "fingerprint": fingerprint()}
    return call.operation("setTags", r)


@handler("compute.instances.stop")
def _stop(call: Call) -> Resource:
    r = call.get()
    r["status"] = "STOPPING"
    return call.operation("stop", r, done=lambda: r.update(status="TERMINATED", lastStopTimestamp=now()))


@handler("compute.instances.start")
def _start(call: Call) -> Resource:
    r = call.get()
    if r["status"] == "TERMINATED":
        r["status"] = "STAGING"
    state = call.state
    return call.operation("start", r, done=lambda: running(state, r))


@handler("compute.instances.getGuestAttributes")
def _guest_attributes(call: Call) -> Resource:
    return guest.query(call.get(), call.query.get("queryPath"), call.query.get("variableKey"))
