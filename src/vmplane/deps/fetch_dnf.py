"""AL2023's Docker engine packages, read from its own repository metadata:
`<mirrors>/<releasever>/<arch>/mirror.list` names the repository's base URL; its `repodata/repomd.xml`
gives the location and sha256 of the `primary` index (AL2023 publishes it gzip-compressed; xz is read
too, zstd is named as unsupported: the stdlib has no decoder before Python 3.14), whose package entries
give `location href`, `checksum type="sha256"` and `size package`. The highest version wins (rpmvercmp).
"""

from __future__ import annotations

import gzip
import io
import lzma
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from vmplane.deps import http
from vmplane.deps.debver import rpm_evr_compare
from vmplane.deps.manifest import Family, Package, PackageSource
from vmplane.deps.sources import DNF_ARCH, DNF_ENGINE, al2023_release, mirrors
from vmplane.envspec.models import Arch

REPO_NS = "{http://linux.duke.edu/metadata/repo}"
COMMON_NS = "{http://linux.duke.edu/metadata/common}"
_RELEASEVER = re.compile(r"/(20\d\d\.\d+\.\d+)(?:/|$)")

Evr = tuple[str, str, str]


def read_family(arch: Arch, cache: Path | None) -> Family:
    """AL2023's pinned engine packages; raises FetchError naming what could not be read."""
    asked = al2023_release()
    mirror_list = f"{mirrors()['al2023']}/{asked}/{DNF_ARCH[arch]}/mirror.list"
    base = _first_mirror(mirror_list)
    repomd = http.get(f"{base}/repodata/repomd.xml").body
    href, sha = primary_location(repomd, f"{base}/repodata/repomd.xml")
    data = http.get_verified(f"{base}/{href}", sha, cache)
    found = parse_primary(_unpack(data, f"{base}/{href}"), DNF_ARCH[arch], set(DNF_ENGINE))
    absent = [n for n in DNF_ENGINE if n not in found]
    if absent:
        raise http.FetchError(f"{', '.join(absent)} not found in {base} ({DNF_ARCH[arch]})")
    found_ver = _RELEASEVER.search(base)
    return Family(
        package_manager="dnf",
        source=PackageSource(
            repository=base,
            releasever=found_ver.group(1) if found_ver else asked,
            release_date=_revision(repomd),
        ),
        packages=[_package(base, n, *found[n]) for n in DNF_ENGINE],
    )


def primary_location(repomd: bytes, where: str) -> tuple[str, str]:
    """The `primary` index's href and sha256 in a repomd.xml."""
    try:
        root = ET.fromstring(repomd)
    except ET.ParseError as err:
        raise http.FetchError(f"{where}: not XML: {err}") from None
    for data in root.iter(f"{REPO_NS}data"):
        if data.get("type") != "primary":
            continue
        checksum, location = data.find(f"{REPO_NS}checksum"), data.find(f"{REPO_NS}location")
        if checksum is None or location is None or checksum.get("type") != "sha256" or not checksum.text:
            raise http.FetchError(f"{where}: the primary entry has no sha256 checksum or location")
        return location.get("href", ""), checksum.text.strip()
    raise http.FetchError(f"{where}: no primary index listed")


def parse_primary(xml: bytes, arch: str, wanted: set[str]) -> dict[str, tuple[Evr, str, str, int | None]]:
    """For each wanted package of `arch` (or noarch), its newest (evr, href, sha256, size)."""
    best: dict[str, tuple[Evr, str, str, int | None]] = {}
    for _, el in ET.iterparse(io.BytesIO(xml)):
        if el.tag != f"{COMMON_NS}package":
            continue
        name = el.findtext(f"{COMMON_NS}name")
        if name in wanted and el.findtext(f"{COMMON_NS}arch") in (arch, "noarch"):
            version, checksum = el.find(f"{COMMON_NS}version"), el.find(f"{COMMON_NS}checksum")
            location, size = el.find(f"{COMMON_NS}location"), el.find(f"{COMMON_NS}size")
            if (
                version is not None
                and checksum is not None
                and checksum.get("type") == "sha256"
                and location is not None
            ):
                evr = (version.get("epoch", "0"), version.get("ver", ""), version.get("rel", ""))
                raw_size = size.get("package", "") if size is not None else ""
                entry = (
                    evr,
                    location.get("href", ""),
                    (checksum.text or "").strip(),
                    int(raw_size) if raw_size.isdigit() else None,
                )
                if name not in best or rpm_evr_compare(evr, best[name][0]) > 0:
                    best[name] = entry
        el.clear()
    return best


def _first_mirror(url: str) -> str:
    for line in http.get(url).body.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if line.startswith(("https://", "http://")):
            return line.rstrip("/")
    raise http.FetchError(f"{url}: names no mirror")


def _unpack(data: bytes, where: str) -> bytes:
    if where.endswith(".gz"):
        return gzip.decompress(data)
    if where.endswith(".xz"):
        return lzma.decompress(data)
    if where.endswith(".zst"):
        raise http.FetchError(f"{where}: zstd-compressed metadata is not supported (the stdlib has no decoder)")
    return data


def _revision(repomd: bytes) -> str | None:
    """repomd.xml's <revision> (a Unix time on AL2023): the metadata's own date."""
    match = re.search(rb"<revision>\s*([^<\s]+)\s*</revision>", repomd)
    if match is None:
        return None
    raw = match.group(1).decode()
    return datetime.fromtimestamp(int(raw), UTC).isoformat() if raw.isdigit() else raw


def _package(base: str, name: str, evr: Evr, href: str, sha256: str, size: int | None) -> Package:
    epoch, ver, rel = evr
    version = f"{epoch}:{ver}-{rel}" if epoch not in ("", "0") else f"{ver}-{rel}"
    return Package(name=name, version=version, url=f"{base}/{href}", sha256=sha256, size=size)
