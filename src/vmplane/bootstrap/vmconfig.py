"""Which vmconfig manifest a pool's VMs boot with, and what it leaves unpinned.

A pool gets the current manifest of its bootstrap kind and architecture (`deps.cache.current`). What a
real VM of the pool would find unpinned (its alias family, the NGINX image) is known before anything is
created: stepValidate refuses it on a real cloud, and the sandbox, `plan` and `tf generate` warn.
"""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vmplane.deps import cache
from vmplane.deps.manifest import Manifest, family_of_image
from vmplane.envspec.models import EnvSpec
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

    def message(self) -> str:
        arch = self.manifest.arch.value
        return (
            f"pools.{self.pool}.image: {self.manifest.filename} does not pin what the VMs need "
            f"({'; '.join(self.missing)}); the bootstrap would fail closed. Fix: run "
            f"`vmplane deps download --arch {arch}` where the repositories are reachable, or pick a pinned image"
        )


def unpinned(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[Unpinned]:
    """Pools whose VMs would find their family (known from an image alias) or the NGINX image unpinned, in
    the manifest they boot with (`job_manifest`: the job's recorded one, else the current one)."""
    out = []
    for name in sorted(spec.pools):
        manifest = job_manifest(spec, name, recorded or {}, home)
        missing = manifest.missing(family_of_image(spec.pools[name].image))
        if missing:
            out.append(Unpinned(name, manifest, missing))
    return out


def record(spec: EnvSpec, home: Path | None = None) -> dict[str, dict[str, str]]:
    """What the job's config keeps per pool at apply (`vmconfig`): the manifest's file name and digest,
    so `plan`/`update` see a changed current manifest as a `vm` change."""
    out = {}
    for name in sorted(spec.pools):
        manifest = pool_manifest(spec, name, home)
        out[name] = {"file": manifest.filename, "digest": manifest.digest()}
    return out


def problems(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[str]:
    return [u.message() for u in unpinned(spec, home, recorded)]


def sandbox_notes(spec: EnvSpec, home: Path | None = None, recorded: dict[str, str] | None = None) -> list[str]:
    """What the sandbox's log says instead of refusing: nothing boots there, so the apply goes on."""
    return [f"sandbox: a real VM would fail closed here: {u.message()}" for u in unpinned(spec, home, recorded)]
