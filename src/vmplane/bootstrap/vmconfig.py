"""Which vmconfig manifest a pool's VMs boot with, and what it leaves unpinned.

A pool gets the current manifest of its bootstrap kind and architecture (`deps.cache.current`). What a
real VM of the pool would find unpinned (its alias family, the NGINX image) is known before anything is
created. Before a real apply `vmconfig_fetch` fetches what is missing (and refuses, before any job, what it
cannot reach); stepValidate refuses it again for a job whose recorded manifest is unpinned; the sandbox,
where nothing boots, and `tf generate --sandbox` only note it.
"""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vmplane.deps import cache
from vmplane.deps.manifest import Manifest, family_of_image
from vmplane.deps.sources import MIRRORS_ENV
from vmplane.envspec.models import Arch, BootstrapMode, Cloud, EnvSpec
from vmplane.settings import Settings

VMCONFIG_PATH = "/etc/vmplane/vmconfig.json"
HELPER_PATH = "/usr/local/lib/vmplane/vmconfig.py"
PACKAGE_DIR = "/var/lib/vmplane/packages"  # private (0700): the downloads are checked before install
BOOTSTRAP_LOG_PATH = "/var/log/vmplane-bootstrap.log"
# The bootstrap log's lines that say what failed (the helper's `vmconfig:` lines name the artifact).
FAILURE_LINES = f"grep -hE 'vmconfig: |FAILED' {BOOTSTRAP_LOG_PATH} 2>/dev/null | tail -n 3"


def default_home() -> Path:
    return Settings().home


def pool_manifest(spec: EnvSpec, pool_name: str, home: Path | None = None) -> Manifest:
    pool = spec.pools[pool_name]
    return cache.current(home if home is not None else default_home(), spec.bootstrap.mode, pool.arch)


def job_manifest(spec: EnvSpec, pool_name: str, recorded: dict[str, str], home: Path | None = None) -> Manifest:
    """The manifest a job's VMs of `pool_name` boot with: the one the job recorded (`recorded`: pool ->
    digest), so a `deps download` during an apply or before a resume changes nothing until an update
    adopts it; the current one when the job recorded none or the cache no longer has it."""
    digest = recorded.get(pool_name)
    if digest:
        pool = spec.pools[pool_name]
        found = cache.by_digest(home if home is not None else default_home(), spec.bootstrap.mode, pool.arch, digest)
        if found is not None:
            return found
    return pool_manifest(spec, pool_name, home)


def same_manifest(spec: EnvSpec, pool_name: str, recorded: str, current: str, home: Path | None = None) -> bool:
    """Whether a digest a job recorded names the current manifest: equal, or recorded by vmplane 0.2.0
    (over `generatedAt` too) for the same file, which is then no change to roll out."""
    if recorded == current:
        return True
    found = cache.by_digest(
        home if home is not None else default_home(), spec.bootstrap.mode, spec.pools[pool_name].arch, recorded
    )
    return found is not None and found.digest() == current and found.legacy_digest() == recorded


def recorded_digests(config: dict[str, object]) -> dict[str, str]:
    """pool -> digest from a job config's `vmconfig` record (see `record`)."""
    rec = config.get("vmconfig")
    if not isinstance(rec, dict):
        return {}
    return {pool: str(v["digest"]) for pool, v in rec.items() if isinstance(v, dict) and "digest" in v}


def helper_source() -> str:
    return resources.files("vmplane.bootstrap").joinpath("vmconfig_helper.py").read_text(encoding="utf-8")


def gz_b64(text: str) -> str:
    """cloud-init's `encoding: gz+b64`; mtime 0 keeps user-data byte-for-byte deterministic."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


@dataclass(frozen=True)
class Unpinned:
    pool: str
    manifest: Manifest
    missing: list[str]
    field: str  # the spec field that picks what is unpinned (see `unpinned`)

    def message(self) -> str:
        return (
            f"{self.field}: {self.manifest.filename} does not pin what the VMs need "
            f"({'; '.join(self.missing)}); the bootstrap would fail closed"
        )


def unpinned(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[Unpinned]:
    """Pools whose VMs would find their family (known from an image alias) or the NGINX image unpinned, in
    the manifest they boot with (`job_manifest`: the job's recorded one, else the current one)."""
    found = (pool_unpinned(spec, name, job_manifest(spec, name, recorded or {}, home)) for name in sorted(spec.pools))
    return [u for u in found if u is not None]


def pool_unpinned(spec: EnvSpec, pool: str, manifest: Manifest) -> Unpinned | None:
    """What a VM of `pool` booting with `manifest` would find unpinned, or None."""
    family = family_of_image(spec.pools[pool].image)
    missing = manifest.missing(family)
    if not missing:
        return None
    return Unpinned(pool, manifest, missing, _field(spec, pool, family is None or family in manifest.families))


def _field(spec: EnvSpec, pool: str, family_pinned: bool) -> str:
    """`pools.X.image` when the image's family is what is missing; a Proxmox pool has no `image` to
    change (its family comes from `template`); for the NGINX image alone, the pool (`bootstrap.mode`)."""
    if family_pinned:
        return f"pools.{pool}"
    return f"pools.{pool}.proxmox.template" if spec.provider.cloud is Cloud.proxmox else f"pools.{pool}.image"


def record(spec: EnvSpec, home: Path | None = None) -> dict[str, dict[str, str]]:
    """What the job's config keeps per pool at apply (`vmconfig`): the manifest's file name and digest,
    so `plan`/`update` see a changed current manifest as a `vm` change."""
    out = {}
    for name in sorted(spec.pools):
        manifest = pool_manifest(spec, name, home)
        out[name] = {"file": manifest.filename, "digest": manifest.digest()}
    return out


def problems(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[str]:
    found = unpinned(spec, home, recorded)
    return [u.message() for u in found] + ([ways_out(spec, found, home)] if found else [])


def ways_out(spec: EnvSpec, found: list[Unpinned], home: Path | None = None) -> str:
    """How to pin what `found` lacks where the repositories cannot be reached from here."""
    at = home if home is not None else default_home()
    archs = sorted({u.manifest.arch.value for u in found})
    bare = sorted({f for a in archs for f in cache.current(at, BootstrapMode.bare, Arch(a)).families})
    bare_hint = (
        f"`bootstrap.mode: bare` with an image of a family its manifest pins ({', '.join(bare)})"
        if bare and spec.provider.cloud is not Cloud.proxmox
        else "`bootstrap.mode: bare` on a template of a pinned family"
        if bare
        else "`bootstrap.mode: bare` once a family is pinned"
    )
    return (
        f"ways out: point {MIRRORS_ENV} at a mirror that serves it (a JSON object of names to base URLs); "
        f"or run `vmplane deps download --arch {' / '.join(archs)}` on a machine that reaches the repositories "
        f"and copy its $VMPLANE_HOME/deps to {at / 'deps'}; or {bare_hint}"
    )


def sandbox_notes(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[str]:
    """What the sandbox's log says instead of refusing: nothing boots there, so the apply goes on."""
    return [f"sandbox: a real VM would fail closed here: {u.message()}" for u in unpinned(spec, home, recorded)]
