"""The local cache of vmconfig manifests, `$VMPLANE_HOME/deps/vmconfig/<kind>.<arch>/`.

Additive: every manifest saved stays (named by its time and digest), so environments pinned to an older
one can still be rendered; `current` names the one new renders use. Without a cached manifest, the one
shipped in the package (`deps/builtin/`) is used.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from vmplane.deps.manifest import Manifest, filename
from vmplane.envspec.models import Arch, BootstrapMode
from vmplane.errors import UsageError

CURRENT = "current"


class ManifestError(UsageError):
    """A manifest file that cannot be read or does not match the schema; names the file and field."""


def deps_dir(home: Path) -> Path:
    return home / "deps"


def manifest_dir(home: Path, kind: BootstrapMode, arch: Arch) -> Path:
    return deps_dir(home) / "vmconfig" / f"{BootstrapMode(kind).value}.{Arch(arch).value}"


def parse(text: str, source: str) -> Manifest:
    """A manifest from its JSON text; `source` (a path) is named in the error."""
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors())
        raise ManifestError(f"{source}: not a vmconfig manifest: {problems}") from None


def load(path: Path) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ManifestError(f"{path}: cannot read the manifest: {err.strerror}") from None
    return parse(text, str(path))


def save(home: Path, manifest: Manifest) -> Path:
    """Store `manifest` beside the ones already cached and make it current; returns its path.

    A manifest that pins the same as one already cached (the same digest: `generatedAt` aside) is not
    written again: that file becomes (or stays) current, so a re-run of `deps download` over unchanged
    upstream content changes neither `current` nor the user-data rendered from it."""
    folder = manifest_dir(home, manifest.kind, manifest.arch)
    folder.mkdir(parents=True, exist_ok=True)
    digest = manifest.digest()
    path = _same(home, manifest.kind, manifest.arch, digest)
    if path is None:
        stamp = manifest.generated_at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = folder / f"{stamp}-{digest[:12]}.json"
        _write_atomically(path, manifest.dumps())
    pointer = folder / CURRENT
    if not pointer.is_file() or pointer.read_text(encoding="utf-8").strip() != path.name:
        _write_atomically(pointer, path.name + "\n")
    return path


def _same(home: Path, kind: BootstrapMode, arch: Arch, digest: str) -> Path | None:
    """The cached file pinning what `digest` names: the current one first, then the newest."""
    pointer = manifest_dir(home, kind, arch) / CURRENT
    first = [pointer.parent / pointer.read_text(encoding="utf-8").strip()] if pointer.is_file() else []
    for path in [*first, *reversed(saved(home, kind, arch))]:
        if path.is_file() and load(path).digest() == digest:
            return path
    return None


def saved(home: Path, kind: BootstrapMode, arch: Arch) -> list[Path]:
    """Every cached manifest of this kind and architecture, oldest first."""
    folder = manifest_dir(home, kind, arch)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def current(home: Path, kind: BootstrapMode, arch: Arch) -> Manifest:
    """The manifest new renders use: the cache's current one, else the package's, else an empty one
    whose `unavailable` says that nothing was fetched."""
    pointer = manifest_dir(home, kind, arch) / CURRENT
    if pointer.is_file():
        return load(pointer.parent / pointer.read_text(encoding="utf-8").strip())
    shipped = builtin(kind, arch)
    if shipped is not None:
        return shipped
    why = f"no manifest fetched: run `vmplane deps download --arch {Arch(arch).value}`"
    return Manifest(
        kind=kind,
        arch=arch,
        generated_at=datetime(1970, 1, 1, tzinfo=UTC),
        unavailable={"*": why},
    )


def by_digest(home: Path, kind: BootstrapMode, arch: Arch, digest: str) -> Manifest | None:
    """The manifest with this digest (one a job recorded), cached or shipped; None when neither has it.
    A digest recorded by vmplane 0.2.0 (over `generatedAt` too) is found as well (`has_digest`)."""
    paths = list(reversed(saved(home, kind, arch)))
    named = [p for p in paths if digest[:12] in p.name]  # the file's name carries the digest it was saved by
    for path in [*named, *(p for p in paths if p not in named)]:
        if (found := load(path)).has_digest(digest):
            return found
    shipped = builtin(kind, arch)
    return shipped if shipped is not None and shipped.has_digest(digest) else None


def builtin(kind: BootstrapMode, arch: Arch) -> Manifest | None:
    """The manifest shipped in the package for this kind and architecture, if there is one."""
    ref = resources.files("vmplane.deps").joinpath("builtin", filename(kind, arch))
    if not ref.is_file():
        return None
    return parse(ref.read_text(encoding="utf-8"), f"vmplane/deps/builtin/{filename(kind, arch)}")


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
