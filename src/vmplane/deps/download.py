"""`vmplane deps download`: read each family's repository metadata (and the registry, for `nginx`),
download every pinned artifact into `$VMPLANE_HOME/deps/packages/<sha256>/<file>` checking its sha256,
and save one manifest per kind for the architecture (made current by `cache.save`).

What cannot be read is named in the manifest's `unavailable`; a family (or the image) that the current
cached manifest already pinned is kept from it instead, and said so. Downloads are additive: an artifact
already cached with the right sum is not fetched again. Repository indexes are kept by sha256 under
`deps/indexes/`, so a second run reads only the small Release/repomd files again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from vmplane.deps import cache, fetch_apt, fetch_dnf, fetch_registry, http
from vmplane.deps.manifest import AL2023, FAMILIES, NGINX, Family, Image, Manifest, Package
from vmplane.deps.sources import NGINX_TAG, apt_families
from vmplane.envspec.models import Arch, BootstrapMode

Say = Callable[[str], None]
PROGRESS_STEP = 16 << 20  # report a long download's progress every this many bytes


@dataclass
class Outcome:
    """One kind's result: the saved manifest, what was kept from the previous one and why."""

    manifest: Manifest
    path: Path
    kept: dict[str, str] = field(default_factory=dict)  # key -> why the previous entry was kept

    @property
    def complete(self) -> bool:
        return not self.manifest.unavailable and not self.kept

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "kind": m.kind.value,
            "arch": m.arch.value,
            "path": str(self.path),
            "families": {name: [f"{p.name}={p.version}" for p in f.packages] for name, f in m.families.items()},
            "images": {name: i.reference for name, i in m.images.items()},
            "unavailable": dict(m.unavailable),
            "kept": dict(self.kept),
            "complete": self.complete,
        }


@dataclass
class Transfer:
    downloaded: list[Package] = field(default_factory=list)
    reused: list[Package] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(p.size or 0 for p in self.downloaded)


def package_path(home: Path, pkg: Package) -> Path:
    name = unquote(urlsplit(pkg.url).path.rsplit("/", 1)[-1]) or pkg.name
    return cache.deps_dir(home) / "packages" / pkg.sha256 / name


def download(
    home: Path, arch: Arch, kinds: list[BootstrapMode], say: Say = lambda _: None
) -> tuple[list[Outcome], Transfer]:
    """Fetch, download and save the manifests of `kinds` for `arch`."""
    families: dict[str, Family] = {}
    failed: dict[str, str] = {}
    for name in FAMILIES:
        say(f"{name} {arch.value}: reading the repository metadata")
        try:
            families[name] = read_family(home, arch, name)
        except http.FetchError as err:
            failed[name] = str(err)
            say(f"{name} {arch.value}: unavailable: {err}")
    transfer = Transfer()
    for name in list(families):
        try:
            _fetch_packages(home, families[name], transfer, say)
        except http.FetchError as err:
            del families[name]
            failed[name] = str(err)
            say(f"{name} {arch.value}: unavailable: {err}")
    image: Image | None = None
    if BootstrapMode.nginx in kinds:
        say(f"{NGINX} image {NGINX_TAG} {arch.value}: reading the registry")
        try:
            image = fetch_registry.read_image(arch)
        except http.FetchError as err:
            failed[NGINX] = str(err)
            say(f"{NGINX} image {arch.value}: unavailable: {err}")
    now = datetime.now(UTC).replace(microsecond=0)
    outcomes = [_save(home, kind, arch, now, families, image, failed, say) for kind in kinds]
    return outcomes, transfer


def read_family(home: Path, arch: Arch, name: str) -> Family:
    """One family's engine packages, pinned from its repository's metadata (indexes kept by sha256 under
    `deps/indexes/`); nothing is downloaded. Raises FetchError naming the URL that failed."""
    indexes = cache.deps_dir(home) / "indexes"
    if name == AL2023:
        return fetch_dnf.read_family(arch, indexes)
    spec = next((s for s in apt_families(arch) if s.family == name), None)
    if spec is None:
        raise ValueError(f"vmplane pins no family {name!r}")
    return fetch_apt.read_family(spec, arch, indexes)


def _fetch_packages(home: Path, family: Family, transfer: Transfer, say: Say) -> None:
    for pkg in family.packages:
        dest = package_path(home, pkg)
        if dest.is_file() and http.sha256_of(dest) == pkg.sha256:
            transfer.reused.append(pkg)
            continue
        say(f"downloading {pkg.url} ({_mb(pkg.size)})")
        http.download(pkg.url, dest, pkg.sha256, _progress(pkg, say))
        transfer.downloaded.append(pkg)


def _save(
    home: Path,
    kind: BootstrapMode,
    arch: Arch,
    now: datetime,
    families: dict[str, Family],
    image: Image | None,
    failed: dict[str, str],
    say: Say,
) -> Outcome:
    previous = _previous(home, kind, arch)
    out_families = dict(families)
    images = {NGINX: image} if image is not None and kind is BootstrapMode.nginx else {}
    unavailable: dict[str, str] = {}
    kept: dict[str, str] = {}
    for key, why in failed.items():
        if key == NGINX and kind is not BootstrapMode.nginx:
            continue
        old_family = previous.families.get(key) if previous is not None and key != NGINX else None
        old_image = previous.images.get(NGINX) if previous is not None and key == NGINX else None
        if old_family is not None:
            out_families[key] = old_family
        elif old_image is not None and old_image.tag == NGINX_TAG:
            images[NGINX] = old_image
        else:
            unavailable[key] = why
            continue
        kept[key] = f"{why}; kept the entry of the previous manifest"
        say(f"{key} {kind.value}.{arch.value}: kept the previous manifest's entry ({why})")
    manifest = Manifest(
        kind=kind,
        arch=arch,
        generated_at=now,
        families=dict(sorted(out_families.items())),
        images=images,
        unavailable=unavailable,
    )
    return Outcome(manifest, cache.save(home, manifest), kept)


def _previous(home: Path, kind: BootstrapMode, arch: Arch) -> Manifest | None:
    """The cache's current manifest (never the shipped one: only what this cache really read is kept)."""
    if not (cache.manifest_dir(home, kind, arch) / cache.CURRENT).is_file():
        return None
    return cache.current(home, kind, arch)


def _progress(pkg: Package, say: Say) -> Callable[[int, int | None], None]:
    reported = [0]

    def tick(done: int, total: int | None) -> None:
        if done - reported[0] >= PROGRESS_STEP:
            reported[0] = done
            say(f"  {pkg.name}: {_mb(done)} of {_mb(total or pkg.size)}")

    return tick


def _mb(n: int | None) -> str:
    return f"{n / 1e6:.1f} MB" if n is not None else "size unknown"
