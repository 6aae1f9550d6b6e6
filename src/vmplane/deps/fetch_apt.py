"""An apt family's Docker engine packages, read from the archives' own metadata: each suite's
InRelease (or Release) gives the sha256 of `<component>/binary-<arch>/Packages.xz`, which gives each
package's Filename, Size and SHA256; the highest version across the suites wins (dpkg's ordering).

The InRelease signature is not checked here (no keyring is assumed on the host); every byte pinned is
tied by sha256 to the Release file read over verified TLS, and the VM's apt checks signatures itself.
"""

from __future__ import annotations

import gzip
import lzma
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path

from vmplane.deps import http
from vmplane.deps.debver import debian_compare
from vmplane.deps.manifest import Family, Package, PackageSource
from vmplane.deps.sources import APT_ENGINE, APT_OPTIONAL, AptFamily
from vmplane.envspec.models import Arch


@dataclass(frozen=True)
class Release:
    date: str | None
    sha256: dict[str, str] = field(default_factory=dict)  # path below dists/<suite>/ -> sha256


@dataclass(frozen=True)
class Candidate:
    fields: dict[str, str]
    repository: str

    @property
    def version(self) -> str:
        return self.fields["Version"]


def parse_release(text: str) -> Release:
    """The Date and the SHA256 list of a Release file (or the body of a clearsigned InRelease)."""
    if text.startswith("-----BEGIN PGP SIGNED MESSAGE-----"):
        body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
        text = body.split("\n-----BEGIN PGP SIGNATURE-----", 1)[0]
    date, sums, in_sha256 = None, {}, False
    for line in text.splitlines():
        if line.startswith((" ", "\t")):
            if in_sha256:
                parts = line.split()
                if len(parts) == 3:
                    sums[parts[2]] = parts[0]
            continue
        in_sha256 = line.startswith("SHA256:")
        if line.startswith("Date:"):
            date = line.split(":", 1)[1].strip()
    return Release(date, sums)


def parse_packages(text: str, wanted: set[str]) -> list[dict[str, str]]:
    """The stanzas of a Packages index for the `wanted` package names (continuation lines dropped)."""
    out = []
    for stanza in text.split("\n\n"):
        first = stanza.lstrip("\n").split("\n", 1)[0]
        if not first.startswith("Package: ") or first[9:].strip() not in wanted:
            continue
        fields: dict[str, str] = {}
        for line in stanza.strip("\n").splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        out.append(fields)
    return out


def depends_on(fields: dict[str, str]) -> set[str]:
    """The package names a Depends field names (alternatives and version constraints dropped)."""
    names = set()
    for clause in fields.get("Depends", "").split(","):
        for alternative in clause.split("|"):
            name = alternative.strip().split(" ", 1)[0].split(":", 1)[0]
            if name:
                names.add(name)
    return names


def read_family(spec: AptFamily, arch: Arch, cache: Path | None) -> Family:
    """The family's pinned engine packages; raises FetchError naming what could not be read."""
    wanted = {*APT_ENGINE, *APT_OPTIONAL}
    best: dict[str, Candidate] = {}
    dates: list[str] = []
    suites: list[str] = []
    for repo in spec.repos:
        for suite in repo.suites:
            release = _release(repo.url, suite)
            if release.date:
                dates.append(release.date)
            suites.append(suite)
            for component in spec.components:
                for fields in _packages(repo.url, suite, component, arch, release, cache, wanted):
                    name = fields["Package"]
                    if name not in best or debian_compare(fields["Version"], best[name].version) > 0:
                        best[name] = Candidate(fields, repo.url)
    engine = best.get("docker.io")
    names = [*APT_ENGINE, *(n for n in APT_OPTIONAL if engine is not None and n in depends_on(engine.fields))]
    absent = [n for n in names if n not in best]
    if absent:
        where = ", ".join(f"{r.url} {'/'.join(r.suites)}" for r in spec.repos)
        raise http.FetchError(f"{', '.join(absent)} not found in {where} ({'/'.join(spec.components)}, {arch.value})")
    return Family(
        package_manager="apt",
        source=PackageSource(repository=spec.repos[0].url, suites=suites, release_date=_latest(dates)),
        packages=[_package(best[n]) for n in names],
    )


def _release(repo: str, suite: str) -> Release:
    base = f"{repo}/dists/{suite}"
    try:
        resp = http.get(f"{base}/InRelease")
    except http.FetchError as first:
        try:  # an archive without InRelease still has Release; otherwise the first error says why
            resp = http.get(f"{base}/Release")
        except http.FetchError:
            raise first from None
    return parse_release(resp.body.decode("utf-8", errors="replace"))


def _packages(
    repo: str, suite: str, component: str, arch: Arch, release: Release, cache: Path | None, wanted: set[str]
) -> list[dict[str, str]]:
    stem = f"{component}/binary-{arch.value}/Packages"
    for suffix, unpack in ((".xz", lzma.decompress), (".gz", gzip.decompress)):
        sha = release.sha256.get(stem + suffix)
        if sha is not None:
            data = http.get_verified(f"{repo}/dists/{suite}/{stem}{suffix}", sha, cache)
            return parse_packages(unpack(data).decode("utf-8", errors="replace"), wanted)
    raise http.FetchError(f"{repo}/dists/{suite}/Release lists no sha256 for {stem}.xz or .gz")


def _package(c: Candidate) -> Package:
    f = c.fields
    return Package(
        name=f["Package"],
        version=f["Version"],
        url=f"{c.repository}/{f['Filename']}",
        sha256=f["SHA256"],
        size=int(f["Size"]) if f.get("Size", "").isdigit() else None,
    )


def _latest(dates: list[str]) -> str | None:
    """The newest of the suites' Release dates: how fresh the metadata read was."""
    parsed = []
    for d in dates:
        try:
            parsed.append((parsedate_to_datetime(d), d))
        except (TypeError, ValueError):
            continue
    return max(parsed)[1] if parsed else None
