"""The vmconfig manifest: every artifact a VM's bootstrap installs, pinned, for one kind and architecture.

One manifest per bootstrap kind (`nginx` | `bare`) and pool architecture (`amd64` | `arm64`), written
as `vmplane.env.vmconfig.<kind>.<arch>.json`. For each image family it lists the Docker engine packages
with exact versions, the repository (and release) they were read from, their URLs and sha256; for the
`nginx` kind, the NGINX image by digest. The bootstrap installs exactly these and fails closed on a
checksum mismatch. What could not be read when the manifest was made is named in `unavailable`, never
guessed: a VM whose family is missing there fails closed too.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from vmplane.envspec.models import Arch, BootstrapMode

SCHEMA_VERSION: Literal[1] = 1
NGINX = "nginx"  # the key of the NGINX image in `Manifest.images`

# The image families vmplane pins, keyed as the specs' image aliases name them.
AL2023, DEBIAN_12, UBUNTU_2404 = "al2023", "debian-12", "ubuntu-24.04"
FAMILIES = (AL2023, DEBIAN_12, UBUNTU_2404)
# How a booted VM finds its family: /etc/os-release's ID and VERSION_ID.
OS_RELEASE_FAMILY: dict[tuple[str, str], str] = {
    ("amzn", "2023"): AL2023,
    ("debian", "12"): DEBIAN_12,
    ("ubuntu", "24.04"): UBUNTU_2404,
}

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Url = Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Package(_Model):
    name: str
    version: str
    url: Url
    sha256: Sha256
    size: int | None = Field(default=None, ge=0)


class PackageSource(_Model):
    """Where a family's packages were read: the repository, the suites or the versioned release."""

    repository: Url
    suites: list[str] = Field(default_factory=list)  # apt: e.g. bookworm, bookworm-updates, bookworm-security
    releasever: str | None = None  # dnf: AL2023's versioned repository, e.g. 2023.6.20241212
    release_date: str | None = Field(default=None, alias="releaseDate")  # the metadata's own date


class Family(_Model):
    package_manager: Literal["apt", "dnf"] = Field(alias="packageManager")
    source: PackageSource
    packages: list[Package]


class Image(_Model):
    repository: str  # e.g. docker.io/library/nginx
    tag: str
    digest: Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]

    @property
    def reference(self) -> str:
        """What `docker pull` is given: the digest, so the tag moving changes nothing."""
        return f"{self.repository}@{self.digest}"


class Manifest(_Model):
    schema_version: Literal[1] = Field(default=SCHEMA_VERSION, alias="schemaVersion")
    kind: BootstrapMode
    arch: Arch
    generated_at: datetime = Field(alias="generatedAt")
    families: dict[str, Family] = Field(default_factory=dict)
    images: dict[str, Image] = Field(default_factory=dict)
    # What is not pinned, and why (e.g. the repository was unreachable when this was made).
    unavailable: dict[str, str] = Field(default_factory=dict)

    @property
    def filename(self) -> str:
        return filename(self.kind, self.arch)

    def dumps(self) -> str:
        """Canonical JSON (sorted keys, two-space indent, final newline): equal manifests, equal bytes."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def digest(self) -> str:
        """What the manifest pins, hashed: the canonical JSON without `generatedAt`, so reading the same
        upstream content again gives the same digest (and `plan` no change)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"generated_at"})
        return hashlib.sha256((json.dumps(data, indent=2, sort_keys=True) + "\n").encode()).hexdigest()

    def legacy_digest(self) -> str:
        """The digest vmplane 0.2.0 recorded, over the whole file including `generatedAt`: jobs recorded then
        still name their manifest by it (`cache.by_digest`)."""
        return hashlib.sha256(self.dumps().encode()).hexdigest()

    def has_digest(self, digest: str) -> bool:
        return digest in (self.digest(), self.legacy_digest())

    def missing(self, family: str | None) -> list[str]:
        """What a VM of `family` (None: not known before boot) would find unpinned here, with the reason."""
        out = []
        if family is not None and family not in self.families:
            out.append(f"{family}: {self.why_unpinned(family)}")
        if self.kind is BootstrapMode.nginx and NGINX not in self.images:
            out.append(f"{NGINX} image: {self.why_unpinned(NGINX)}")
        return out

    def why_unpinned(self, key: str) -> str:
        return self.unavailable.get(key) or self.unavailable.get("*") or "not in the manifest"


def filename(kind: BootstrapMode, arch: Arch) -> str:
    return f"vmplane.env.vmconfig.{BootstrapMode(kind).value}.{Arch(arch).value}.json"


def family_of_image(image: str) -> str | None:
    """The family an image reference names, when it names one (an alias); None for an AMI id, an SSM
    parameter or another cloud image, whose family the bootstrap finds at boot."""
    return image if image in FAMILIES else None
