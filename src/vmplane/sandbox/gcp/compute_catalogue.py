"""What every sandbox project sees without creating it: a fixed catalogue of regions, zones, machine
types and public images, the project itself, and the operations of its calls."""

from __future__ import annotations

from vmplane.sandbox.gcp import operations
from vmplane.sandbox.gcp.compute import Call, handler
from vmplane.sandbox.gcp.errors import not_found
from vmplane.sandbox.gcp.store import Resource, self_link

REGIONS = {
    "us-central1": ("a", "b", "c", "f"),
    "us-east1": ("b", "c", "d"),
    "europe-west1": ("b", "c", "d"),
}
ZONES = {f"{r}-{z}": r for r, zs in REGIONS.items() for z in zs}
# name: (guestCpus, memoryMb, shared core)
MACHINE_TYPES = {
    "e2-micro": (2, 1024, True),
    "e2-small": (2, 2048, True),
    "e2-medium": (2, 4096, True),
    "e2-standard-2": (2, 8192, False),
    "e2-standard-4": (4, 16384, False),
    "n2-standard-2": (2, 8192, False),
    "n1-standard-1": (1, 3840, False),
}
# project: {family: image name}
IMAGES = {
    "debian-cloud": {"debian-12": "debian-12-bookworm-v20261111", "debian-11": "debian-11-bullseye-v20261111"},
    "ubuntu-os-cloud": {"ubuntu-2404-lts-amd64": "ubuntu-2404-noble-amd64-v20261112"},
}
_CREATED = "2015-01-01T00:00:00.000-08:00"


def _stable_id(text: str) -> str:
    import hashlib

    return str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:7]) + 10**15)


def zone(project: str, name: str) -> Resource:
    if name not in ZONES:
        raise not_found(f"projects/{project}/zones/{name}")
    return {
        "kind": "compute#zone",
        "id": _stable_id(name),
        "creationTimestamp": _CREATED,
        "name": name,
        "description": name,
        "status": "UP",
        "region": self_link(project, f"regions/{ZONES[name]}"),
        "selfLink": self_link(project, f"zones/{name}"),
        "availableCpuPlatforms": ["Intel Broadwell", "AMD Milan"],
        "supportsPzs": False,
    }


def region(project: str, name: str) -> Resource:
    if name not in REGIONS:
        raise not_found(f"projects/{project}/regions/{name}")
    return {
        "kind": "compute#region",
        "id": _stable_id(name),
        "creationTimestamp": _CREATED,
        "name": name,
        "description": name,
        "status": "UP",
        "zones": [self_link(project, f"zones/{name}-{z}") for z in REGIONS[name]],
        "selfLink": self_link(project, f"regions/{name}"),
        "supportsPzs": False,
    }


def machine_type(project: str, zone_name: str, name: str) -> Resource:
    if zone_name not in ZONES or name not in MACHINE_TYPES:
        raise not_found(f"projects/{project}/zones/{zone_name}/machineTypes/{name}")
    cpus, memory, shared = MACHINE_TYPES[name]
    return {
        "kind": "compute#machineType",
        "id": _stable_id(name),
        "creationTimestamp": _CREATED,
        "name": name,
        "description": f"{cpus} vCPU, {memory // 1024} GB RAM",
        "guestCpus": cpus,
        "memoryMb": memory,
        "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168",
        "zone": zone_name,
        "selfLink": self_link(project, f"zones/{zone_name}/machineTypes/{name}"),
        "isSharedCpu": shared,
        "architecture": "X86_64",
    }


def image(project: str, name: str) -> Resource:
    family = next((f for f, n in IMAGES.get(project, {}).items() if n == name), None)
    if family is None:
        raise not_found(f"projects/{project}/global/images/{name}")
    return {
        "kind": "compute#image",
        "id": _stable_id(name),
        "creationTimestamp": _CREATED,
        "name": name,
        "family": family,
        "status": "READY",
        "sourceType": "RAW",
        "diskSizeGb": "10",
        "architecture": "X86_64",
        "selfLink": self_link(project, f"global/images/{name}"),
    }


def image_family(project: str, family: str) -> Resource:
    name = IMAGES.get(project, {}).get(family)
    if name is None:
        raise not_found(f"projects/{project}/global/images/family/{family}")
    return image(project, name)


def known_image(value: str) -> bool:
    """A sourceImage reference: projects/P/global/images/NAME or .../images/family/F (full URL allowed)."""
    tail = value.split("/compute/v1/")[-1]
    parts = tail.split("/")
    if len(parts) >= 5 and parts[0] == "projects" and parts[2:4] == ["global", "images"]:
        project, rest = parts[1], parts[4:]
        if rest[0] == "family" and len(rest) == 2:
            return rest[1] in IMAGES.get(project, {})
        return len(rest) == 1 and rest[0] in IMAGES.get(project, {}).values()
    return False


def _items(call: Call, kind: str, items: list[Resource], where: str) -> Resource:
    return {"kind": kind, "id": where, "items": items, "selfLink": self_link(call.project.id, where)}


@handler("compute.zones.get")
def _zones_get(call: Call) -> Resource:
    return zone(call.project.id, call.params["zone"])


@handler("compute.zones.list")
def _zones_list(call: Call) -> Resource:
    return _items(call, "compute#zoneList", [zone(call.project.id, z) for z in ZONES], "zones")


@handler("compute.regions.get")
def _regions_get(call: Call) -> Resource:
    return region(call.project.id, call.params["region"])


@handler("compute.regions.list")
def _regions_list(call: Call) -> Resource:
    return _items(call, "compute#regionList", [region(call.project.id, r) for r in REGIONS], "regions")


@handler("compute.machineTypes.get")
def _mt_get(call: Call) -> Resource:
    return machine_type(call.project.id, call.params["zone"], call.params["machineType"])


@handler("compute.machineTypes.list")
def _mt_list(call: Call) -> Resource:
    z = call.params["zone"]
    zone(call.project.id, z)
    found = [machine_type(call.project.id, z, m) for m in MACHINE_TYPES]
    return _items(call, "compute#machineTypeList", found, f"zones/{z}/machineTypes")


@handler("compute.images.getFromFamily")
def _image_family(call: Call) -> Resource:
    return image_family(call.params["project"], call.params["family"])


@handler("compute.images.get")
def _image_get(call: Call) -> Resource:
    return image(call.params["project"], call.params["image"])


@handler("compute.projects.get")
def _project_get(call: Call) -> Resource:
    project = call.project
    return {
        "kind": "compute#project",
        "id": project.number,
        "name": project.id,
        "creationTimestamp": _CREATED,
        "selfLink": self_link(project.id, "").rstrip("/"),
        "defaultServiceAccount": default_service_account(project.number),
        "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": "AAAAAAAAAAA=", "items": []},
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
    }


def default_service_account(number: str) -> str:
    return f"{number}-compute@developer.gserviceaccount.com"


def _op_scope(call: Call) -> str:
    return call.scope


def _op_get(call: Call) -> Resource:
    return operations.finish(call.state, operations.lookup(call.project, _op_scope(call), call.params["operation"]))


def _op_list(call: Call) -> Resource:
    prefix = f"{call.scope}/operations/"
    items = [op for key, op in call.project.operations.items() if key.startswith(prefix)]
    return _items(call, "compute#operationList", items, f"{call.scope}/operations")


def _op_delete(call: Call) -> Resource:
    operations.lookup(call.project, call.scope, call.params["operation"])
    del call.project.operations[f"{call.scope}/operations/{call.params['operation']}"]
    return {}


for _scope in ("zoneOperations", "regionOperations", "globalOperations"):
    handler(f"compute.{_scope}.get")(_op_get)
    handler(f"compute.{_scope}.wait")(_op_get)  # `wait` may return DONE at once, as Google documents
    handler(f"compute.{_scope}.list")(_op_list)
    handler(f"compute.{_scope}.delete")(_op_delete)
