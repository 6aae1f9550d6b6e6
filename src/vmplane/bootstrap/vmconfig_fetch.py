"""Manifests fetch themselves: before a real apply, what the pools need and the cache lacks is pinned.

For every (kind, arch) the pools use, the current manifest (`cache.current`: the cache's, else the shipped
one) must pin each pool's alias family and, for `nginx`, the NGINX image. What it lacks is read with the
fetchers of `vmplane deps download` (honouring VMPLANE_DEPS_MIRRORS, with deps/http.py's timeouts and
retries), merged into that manifest's entries and saved as current (`cache.save`).

Only the pinning metadata is fetched (repository indexes, the registry's manifest digest): each VM downloads
its packages from the pinned URLs and checks their sha256 itself. `vmplane deps download` is what also fills
the offline package cache ($VMPLANE_HOME/deps/packages).

The saved manifest keeps the current one's other entries, the shipped ones included (on a fresh home the
shipped Debian/Ubuntu entries): a later `deps download` that cannot reach a family keeps that entry (`kept`).
What cannot be reached stays unpinned; `refuse_unpinned` then refuses, before any job is recorded. A run
that pinned nothing saves nothing (the cache and `current` stay as they were).
The sandbox boots nothing and never calls this: it stays offline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

from vmplane.bootstrap import vmconfig
from vmplane.deps import cache, download, fetch_registry, http
from vmplane.deps.manifest import NGINX, Family, Image, Manifest, family_of_image
from vmplane.envspec.models import Arch, BootstrapMode, EnvSpec
from vmplane.errors import UsageError

Say = Callable[[str], None]
T = TypeVar("T")


class UnpinnedError(UsageError):
    """A pool's VMs would boot with something unpinned that could not be fetched from here (exit 2, HTTP
    422): refused before any job exists, naming the pool, what is unpinned, the URL tried and the ways out."""


def needed(spec: EnvSpec) -> dict[tuple[BootstrapMode, Arch], set[str]]:
    """(kind, arch) -> what its manifest must pin for the pools: their alias families, and the NGINX image."""
    kind = BootstrapMode(spec.bootstrap.mode)
    out: dict[tuple[BootstrapMode, Arch], set[str]] = {}
    for pool in spec.pools.values():
        keys = out.setdefault((kind, pool.arch), set())
        family = family_of_image(pool.image)
        if family is not None:
            keys.add(family)
        if kind is BootstrapMode.nginx:
            keys.add(NGINX)
    return out


def lacking(manifest: Manifest, keys: set[str]) -> list[str]:
    """The keys of `keys` (families, `nginx`) that `manifest` does not pin."""
    return sorted(k for k in keys if (k not in manifest.images if k == NGINX else k not in manifest.families))


def fetch_missing(spec: EnvSpec, home: Path, say: Say = lambda _m: None) -> list[vmconfig.Unpinned]:
    """Fetch and pin what the pools need that the current manifests lack; returns what is still unpinned,
    each reason naming the URL this run tried (or, where nothing was tried, the manifest's own reason)."""
    families: dict[tuple[Arch, str], Family | str] = {}  # read once per arch for both kinds; str: why not
    images: dict[Arch, Image | str] = {}
    effective: dict[tuple[BootstrapMode, Arch], Manifest] = {}
    for (kind, arch), keys in sorted(needed(spec).items()):
        current = cache.current(home, kind, arch)
        missing = lacking(current, keys)
        effective[(kind, arch)] = current
        if not missing:
            continue
        say(
            f"vmconfig {kind.value}.{arch.value}: {', '.join(missing)} not pinned in {cache.deps_dir(home)}: "
            "fetching the pinning metadata only (each VM downloads its packages from the pinned URLs; "
            "`vmplane deps download` fills the offline cache)"
        )
        got: dict[str, Family] = {}
        image: Image | None = None
        failed: dict[str, str] = {}
        for key in missing:
            found: Family | Image | str
            if key == NGINX:
                if arch not in images:
                    images[arch] = _read(partial(fetch_registry.read_image, arch), f"{NGINX} image", arch, say)
                found = images[arch]
            else:
                if (arch, key) not in families:
                    families[(arch, key)] = _read(partial(download.read_family, home, arch, key), key, arch, say)
                found = families[(arch, key)]
            if isinstance(found, str):
                failed[key] = found
            elif isinstance(found, Image):
                image = found
            else:
                got[key] = found
        merged = _merged(current, got, image, failed)
        effective[(kind, arch)] = merged
        if got or image is not None:  # a run that pinned nothing leaves the cache as it was
            path = cache.save(home, merged)
            pinned = ", ".join(k for k in missing if k not in failed)
            say(f"vmconfig {kind.value}.{arch.value}: pinned {pinned}; current is {path}")
    kind = BootstrapMode(spec.bootstrap.mode)
    left = (vmconfig.pool_unpinned(spec, name, effective[(kind, spec.pools[name].arch)]) for name in sorted(spec.pools))
    return [u for u in left if u is not None]


def refuse_unpinned(spec: EnvSpec, home: Path, say: Say = lambda _m: None) -> None:
    """`fetch_missing`, then refuse what is still unpinned (UnpinnedError): nothing has been recorded yet."""
    left = fetch_missing(spec, home, say)
    if left:
        ways = vmconfig.ways_out(spec, left, home)
        raise UnpinnedError(
            "; ".join(u.message() for u in left) + ". Nothing was recorded. " + ways[0].upper() + ways[1:]
        )


def _read(read: Callable[[], T], what: str, arch: Arch, say: Say) -> T | str:
    """`read()`, or why it failed (the FetchError names the URL)."""
    say(f"  {what} {arch.value}: reading {'the registry' if what.startswith(NGINX) else 'the repository metadata'}")
    try:
        return read()
    except http.FetchError as err:
        say(f"  {what} {arch.value}: unavailable: {err}")
        return str(err)


def _merged(current: Manifest, got: dict[str, Family], image: Image | None, failed: dict[str, str]) -> Manifest:
    """The current manifest's entries with what was fetched; each failure's reason is this run's."""
    unavailable = {k: v for k, v in current.unavailable.items() if k not in got and (k != NGINX or image is None)}
    return Manifest(
        kind=current.kind,
        arch=current.arch,
        generated_at=datetime.now(UTC).replace(microsecond=0),
        families=dict(sorted({**current.families, **got}.items())),
        images={**current.images, **({NGINX: image} if image is not None else {})},
        unavailable=dict(sorted({**unavailable, **failed}.items())),
    )
