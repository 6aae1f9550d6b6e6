"""Rules on an instance's (or a template's) disks: a boot disk, first, from a source or an image, no
smaller than that image."""

from __future__ import annotations

from typing import Any

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.compute_catalogue import image, image_family, known_image
from vmplane.sandbox.gcp.rules import bad, body, rule
from vmplane.sandbox.gcp.rules.examples import IMAGE, boot, net, sub, template, vm

_METHODS = ("compute.instances.insert", "compute.instanceTemplates.insert", "compute.regionInstanceTemplates.insert")
_DISKS = "https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert"
MAX_DISK_GB = 65536  # a persistent disk's ceiling (64 TiB)


def _disks(call: Call) -> tuple[str, list[Any]]:
    """(field prefix, the disks) of an instance or a template; instances from a template are not checked
    here (the body may leave the disks to the template)."""
    given = body(call)
    if call.method.id == "compute.instances.insert":
        if call.query.get("sourceInstanceTemplate"):
            return "resource.disks", []
        return "resource.disks", list(given.get("disks") or [])
    return "resource.properties.disks", list((given.get("properties") or {}).get("disks") or [])


def _from_template(call: Call) -> bool:
    return call.method.id == "compute.instances.insert" and bool(call.query.get("sourceInstanceTemplate"))


def _boot_required(call: Call) -> None:
    where, disks = _disks(call)
    if not _from_template(call) and not any(isinstance(d, dict) and d.get("boot") for d in disks):
        raise bad(where, "", "A boot disk is required: exactly one disk must have boot set to true.")


def _boot_first(call: Call) -> None:
    where, disks = _disks(call)
    for i, disk in enumerate(disks):
        if i > 0 and isinstance(disk, dict) and disk.get("boot"):
            raise bad(f"{where}[{i}]", disk, "Boot disk must be the first disk attached to the instance.")


def _source_or_params(call: Call) -> None:
    where, disks = _disks(call)
    for i, disk in enumerate(disks):
        if isinstance(disk, dict) and not disk.get("source") and not disk.get("initializeParams"):
            raise bad(f"{where}[{i}]", "", "Source or initializeParams must be specified.")


def _not_both(call: Call) -> None:
    where, disks = _disks(call)
    for i, disk in enumerate(disks):
        if isinstance(disk, dict) and disk.get("source") and disk.get("initializeParams"):
            raise bad(f"{where}[{i}]", "", "Cannot specify both 'source' and 'initializeParams'.")


def image_size_gb(reference: str) -> int | None:
    """The catalogue image's own size (its `diskSizeGb`), or None if the sandbox does not know it."""
    if not known_image(reference):
        return None
    parts = reference.split("/compute/v1/")[-1].split("/")
    project, rest = parts[1], parts[4:]
    found = image_family(project, rest[1]) if rest[0] == "family" else image(project, rest[0])
    return int(found["diskSizeGb"])


def _size_below_image(call: Call) -> None:
    where, disks = _disks(call)
    for i, disk in enumerate(disks):
        init = disk.get("initializeParams") if isinstance(disk, dict) else None
        if not isinstance(init, dict) or init.get("diskSizeGb") is None or not init.get("sourceImage"):
            continue
        size, needed = int(init["diskSizeGb"]), image_size_gb(str(init["sourceImage"]))
        if needed is not None and size < needed:
            raise bad(
                f"{where}[{i}].initializeParams.diskSizeGb",
                size,
                f"Requested disk size cannot be smaller than the image size ({needed} GB)",
            )


def _size_max(call: Call) -> None:
    where, disks = _disks(call)
    for i, disk in enumerate(disks):
        init = disk.get("initializeParams") if isinstance(disk, dict) else None
        if isinstance(init, dict) and init.get("diskSizeGb") is not None and int(init["diskSizeGb"]) > MAX_DISK_GB:
            raise bad(
                f"{where}[{i}].initializeParams.diskSizeGb",
                init["diskSizeGb"],
                f"Disk size cannot be larger than {MAX_DISK_GB} GB.",
            )


_SETUP = (net(), sub())
data = {"autoDelete": True, "initializeParams": {"diskSizeGb": "20"}}

rule(
    "compute.disk-boot-required",
    _METHODS,
    "an instance or template with no boot disk",
    "https://cloud.google.com/compute/docs/disks#introduction",
    "400 invalid",
    "200: an instance with no disk at all",
    (*_SETUP, vm(disks=[])),
    _boot_required,
)
rule(
    "compute.disk-boot-first",
    _METHODS,
    "a boot disk that is not the first disk (also a second boot disk)",
    "https://github.com/googleapis/nodejs-compute/issues/518",
    "400 invalid",
    "200",
    (*_SETUP, vm(disks=[data, boot()])),
    _boot_first,
)
rule(
    "compute.disk-source-or-params",
    _METHODS,
    "a disk with neither `source` nor `initializeParams`",
    "https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert",
    "400 invalid",
    "200: a disk of nothing",
    (*_SETUP, template(disks=[boot(), {"autoDelete": True}])),
    _source_or_params,
)
rule(
    "compute.disk-source-and-params",
    _METHODS,
    "a disk with both `source` and `initializeParams`",
    "https://github.com/hashicorp/terraform-provider-google/issues/658",
    "400 invalid",
    "200",
    (*_SETUP, vm(disks=[{**boot(), "source": "zones/us-central1-a/disks/d1"}])),
    _not_both,
)
rule(
    "compute.disk-smaller-than-image",
    _METHODS,
    "a boot disk smaller than its image (Debian and Ubuntu images are 10 GB)",
    "https://github.com/BasedHardware/omi/pull/7155",
    "400 invalid",
    "200: an 8 GB disk from a 10 GB image",
    (*_SETUP, template(disks=[boot(diskSizeGb="8")])),
    _size_below_image,
)
rule(
    "compute.disk-size-max",
    _METHODS,
    f"a disk larger than {MAX_DISK_GB} GB",
    "https://cloud.google.com/compute/docs/disks/persistent-disks#disk_size",
    "400 invalid",
    "200",
    (*_SETUP, vm(disks=[boot(diskSizeGb="70000", sourceImage=IMAGE)])),
    _size_max,
)
