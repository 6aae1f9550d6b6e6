"""A pool's `image` -> the self-link of the image an instance template boots from.

Accepted forms: an alias below (a public image family), `<project>/<family>` for another project's
family, or an explicit image `projects/<p>/global/images/<name>` (a full URL too). Families resolve
through `images.getFromFamily`, so a new apply picks the family's current image; the template records
the self-link, so the VMs of one template version all boot the same image.
"""

from __future__ import annotations

import re
from typing import Any

from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients

# alias -> (image project, family)
FAMILIES: dict[str, tuple[str, str]] = {
    "debian-12": ("debian-cloud", "debian-12"),
    "debian-11": ("debian-cloud", "debian-11"),
    "ubuntu-24.04": ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"),
    "ubuntu-22.04": ("ubuntu-os-cloud", "ubuntu-2204-lts"),
}
# Image projects whose public images have no cloud-init (Google's Debian images run startup scripts
# through the guest agent instead): vmplane's bootstrap would never run there.
NO_CLOUD_INIT = frozenset({"debian-cloud"})
_EXPLICIT = re.compile(
    r"^(?:https://www\.googleapis\.com/compute/v1/)?projects/([a-z][-a-z0-9.:]*)/global/images/([a-z][-a-z0-9]*)$"
)
_FAMILY_IN = re.compile(r"^([a-z][-a-z0-9]*)/([a-z][-a-z0-9]*)$")


def image_ref(image: str) -> tuple[str, str, bool]:
    """(project, family-or-name, is_family) of an image reference, without calling the cloud."""
    if image in FAMILIES:
        project, family = FAMILIES[image]
        return project, family, True
    if m := _EXPLICIT.match(image):
        return m.group(1), m.group(2), False
    if m := _FAMILY_IN.match(image):
        return m.group(1), m.group(2), True
    known = ", ".join(sorted(FAMILIES))
    raise InvalidRequestError(
        f"unknown image {image!r}: use one of {known}, <project>/<family>, or projects/<p>/global/images/<name>"
    )


def resolve_image(gcp: GcpClients, image: str) -> str:
    """The self-link of `image`'s current image; InvalidRequestError if it does not resolve."""
    return str(lookup_image(gcp, image).self_link)


def lookup_image(gcp: GcpClients, image: str) -> Any:
    """`image`'s current compute Image (self-link, `diskSizeGb`); InvalidRequestError if it does not resolve."""
    project, name, family = image_ref(image)
    client = gcp.compute("Images")
    try:
        if family:
            found = gcp.call(
                "compute.images.getFromFamily",
                lambda: client.get_from_family(project=project, family=name, timeout=CALL_TIMEOUT),
            )
        else:
            found = gcp.call(
                "compute.images.get", lambda: client.get(project=project, image=name, timeout=CALL_TIMEOUT)
            )
    except NotFoundError as e:
        what = f"image family {name}" if family else f"image {name}"
        raise InvalidRequestError(f"{what} not found in project {project}") from e
    return found
