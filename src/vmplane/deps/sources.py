"""Where `vmplane deps download` reads each family's packages and the NGINX image, and which packages.

Every base URL can be replaced by a mirror: `VMPLANE_DEPS_MIRRORS` is a JSON object whose keys are the
names in `DEFAULT_MIRRORS` (e.g. `{"debian": "https://mirror.example/debian"}`), for users behind a
proxy or an internal mirror (and for the tests' local fakes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from vmplane.deps.manifest import DEBIAN_12, UBUNTU_2404
from vmplane.envspec.models import Arch
from vmplane.errors import UsageError

MIRRORS_ENV = "VMPLANE_DEPS_MIRRORS"
AL2023_RELEASE_ENV = "VMPLANE_DEPS_AL2023_RELEASEVER"  # a versioned AL2023 release, default `latest`

DEFAULT_MIRRORS: dict[str, str] = {
    "debian": "https://deb.debian.org/debian",
    "debian-security": "https://security.debian.org/debian-security",
    "ubuntu": "https://archive.ubuntu.com/ubuntu",
    "ubuntu-security": "https://security.ubuntu.com/ubuntu",
    "ubuntu-ports": "https://ports.ubuntu.com/ubuntu-ports",  # Ubuntu's non-x86 architectures
    "al2023": "https://cdn.amazonlinux.com/al2023/core/mirrors",
    "registry": "https://registry-1.docker.io",
}

# The Docker engine, as each family's repositories split it. apt: docker.io depends on containerd and
# runc, and on Debian 12 also on tini (Ubuntu 24.04's does not): `apt_packages` adds whatever of
# APT_OPTIONAL docker.io's own Depends field names. dnf (AL2023): docker requires containerd and runc.
APT_ENGINE = ("docker.io", "containerd", "runc")
APT_OPTIONAL = ("tini",)
DNF_ENGINE = ("docker", "containerd", "runc")

# The NGINX image the `nginx` kind runs; the bootstrap reads the tag from here too.
NGINX_REPOSITORY = "library/nginx"
NGINX_TAG = "1.27.3-alpine"
OCI_PLATFORM: dict[Arch, tuple[str, str | None]] = {Arch.amd64: ("amd64", None), Arch.arm64: ("arm64", "v8")}
DNF_ARCH: dict[Arch, str] = {Arch.amd64: "x86_64", Arch.arm64: "aarch64"}


@dataclass(frozen=True)
class AptRepo:
    """One apt repository and the suites read from it."""

    url: str
    suites: tuple[str, ...]


@dataclass(frozen=True)
class AptFamily:
    family: str
    repos: tuple[AptRepo, ...]
    components: tuple[str, ...]  # Ubuntu ships docker.io in universe


def mirrors() -> dict[str, str]:
    raw = os.environ.get(MIRRORS_ENV, "").strip()
    if not raw:
        return dict(DEFAULT_MIRRORS)
    try:
        given = json.loads(raw)
    except json.JSONDecodeError as err:
        raise UsageError(f"{MIRRORS_ENV}: not JSON: {err}") from None
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise UsageError(f"{MIRRORS_ENV}: must be a JSON object of names to base URLs")
    unknown = sorted(set(given) - set(DEFAULT_MIRRORS))
    if unknown:
        raise UsageError(f"{MIRRORS_ENV}: unknown name(s) {', '.join(unknown)}; known: {', '.join(DEFAULT_MIRRORS)}")
    return {**DEFAULT_MIRRORS, **{k: v.rstrip("/") for k, v in given.items()}}


def apt_families(arch: Arch) -> list[AptFamily]:
    m = mirrors()
    ubuntu, ubuntu_security = (
        (m["ubuntu"], m["ubuntu-security"]) if arch is Arch.amd64 else (m["ubuntu-ports"], m["ubuntu-ports"])
    )
    return [
        AptFamily(
            DEBIAN_12,
            (
                AptRepo(m["debian"], ("bookworm", "bookworm-updates")),
                AptRepo(m["debian-security"], ("bookworm-security",)),
            ),
            ("main",),
        ),
        AptFamily(
            UBUNTU_2404,
            (AptRepo(ubuntu, ("noble", "noble-updates")), AptRepo(ubuntu_security, ("noble-security",))),
            ("main", "universe"),
        ),
    ]


def al2023_release() -> str:
    return os.environ.get(AL2023_RELEASE_ENV, "").strip() or "latest"
