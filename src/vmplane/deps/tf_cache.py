"""The offline Terraform provider cache, `$VMPLANE_HOME/deps/tf/`: provider packages and one lock per cloud.

`providers/` is a filesystem mirror (registry.terraform.io/NAMESPACE/TYPE/...), additive: every version and
platform fetched stays side by side. `locks/<cloud>.terraform.lock.hcl` is the dependency lock made from
that mirror (`terraform providers lock -fs-mirror`), replaced on each refresh, with `<cloud>.json` noting
the platforms it covers. A generated stack refers to both (see `vmplane.tf.provider_cache`).

Filling it: `terraform providers mirror` talks only to the providers' origin registry (it ignores the CLI
config's `provider_installation`). Where that registry is unreachable, `terraform init` with
TF_PLUGIN_CACHE_DIR pointed at `providers/` installs through the user's CLI config (a mirror, as on an
isolated machine), for the host's platform only; other platforms are then named as unavailable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vmplane.errors import VmplaneError

Progress = Callable[[str], None]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TIMEOUT = 1800.0  # a provider package is hundreds of MB: downloads may be slow


class TerraformError(VmplaneError):
    """Terraform is missing or one of its commands failed: names the command line and its stderr."""


@dataclass
class CacheResult:
    cloud: str
    platforms: list[str] = field(default_factory=list)  # the platforms the lock covers
    lock: str | None = None
    via: str = ""  # how the packages were obtained
    unavailable: list[str] = field(default_factory=list)  # what could not be had, each with the reason
    notes: list[str] = field(default_factory=list)  # what failed on the way but was had another way

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def tf_dir(home: Path) -> Path:
    return home / "deps" / "tf"


def providers_dir(home: Path) -> Path:
    return tf_dir(home) / "providers"


def lock_path(home: Path, cloud: str) -> Path:
    return tf_dir(home) / "locks" / f"{cloud}.terraform.lock.hcl"


def saved_platforms(home: Path, cloud: str) -> list[str]:
    """The platforms the cached lock of `cloud` was made for (empty without one)."""
    meta = lock_path(home, cloud).with_name(f"{cloud}.json")
    try:
        return [str(p) for p in json.loads(meta.read_text())["platforms"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def terraform_bin() -> str:
    """VMPLANE_TERRAFORM, else `terraform`, else `tofu` on PATH."""
    override = os.environ.get("VMPLANE_TERRAFORM")
    if override:
        found = shutil.which(override)
        if found is None:
            raise TerraformError(f"VMPLANE_TERRAFORM={override} is not an executable")
        return found
    for name in ("terraform", "tofu"):
        found = shutil.which(name)
        if found:
            return found
    raise TerraformError("neither terraform nor tofu is on PATH (or set VMPLANE_TERRAFORM to one)")


def run_tf(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run terraform without colours or prompts; a failure raises with the command line and its stderr."""
    full = {**os.environ, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1", **(env or {})}
    try:
        proc = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TerraformError(f"`{' '.join(args)}` could not run: {err}") from err
    if proc.returncode != 0:
        # Only terraform's own diagnostics: no environment, so nothing secret is repeated.
        detail = _ANSI.sub("", proc.stderr or proc.stdout).strip()[-2000:]
        raise TerraformError(f"`{' '.join(args)}` (in {cwd}) exited {proc.returncode}:\n{detail}")
    return proc


def host_platform(tf: str, cwd: Path) -> str:
    return str(json.loads(run_tf([tf, "version", "-json"], cwd).stdout)["platform"])


def refresh(
    home: Path,
    cloud: str,
    versions_tf: str,
    required: dict[str, str],
    platforms: list[str],
    progress: Progress,
) -> CacheResult:
    """Mirror `required` (source -> version constraint, as in `versions_tf`) for `platforms` into the
    cache and write the cloud's lock for those of them it holds. What could not be had is in `unavailable`."""
    tf = terraform_bin()
    result = CacheResult(cloud)
    cache = providers_dir(home)
    cache.mkdir(parents=True, exist_ok=True)
    wanted = ", ".join(f"{s} {v}" for s, v in sorted(required.items()))
    with tempfile.TemporaryDirectory(prefix="vmplane-tf-") as tmp:
        work = Path(tmp)
        (work / "versions.tf").write_text(versions_tf)
        got = _mirror(tf, work, cache, cloud, platforms, progress, result)
        if not got:
            result.unavailable.insert(0, f"{wanted} for {', '.join(platforms)}: not obtained (reasons below)")
            return result
        progress(f"{cloud}: locking {wanted} for {', '.join(got)} from {cache}")
        lock_dir = work / "lock"
        lock_dir.mkdir()
        (lock_dir / "versions.tf").write_text(versions_tf)
        locked = _lock(tf, lock_dir, cache, got, result)
        if not locked:
            return result
        dest = lock_path(home, cloud)
        before = saved_platforms(home, cloud)
        if dest.is_file() and set(before) - set(locked):
            # A refresh that could not get every platform never narrows the lock a fuller run made.
            result.unavailable.append(f"kept the cached lock for {', '.join(before)} rather than narrow it")
            result.platforms, result.lock = before, str(dest)
            return result
        dest.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(dest, (lock_dir / ".terraform.lock.hcl").read_text())
        _atomic_write(dest.with_name(f"{cloud}.json"), json.dumps({"platforms": locked}, indent=2) + "\n")
        result.platforms, result.lock = locked, str(dest)
    return result


def _mirror(
    tf: str, work: Path, cache: Path, cloud: str, platforms: list[str], progress: Progress, result: CacheResult
) -> list[str]:
    """Fill the cache; the platforms now in it."""
    progress(f"{cloud}: terraform providers mirror ({', '.join(platforms)}) into {cache}")
    try:
        run_tf([tf, "providers", "mirror", "-no-color", *(f"-platform={p}" for p in platforms), str(cache)], work)
        result.via = "terraform providers mirror (origin registry)"
        return list(platforms)
    except TerraformError as err:
        registry_error = f"origin registry: {err}"
    # No origin registry (or it failed): install through the CLI config (e.g. a mirror), for the host only.
    host = host_platform(tf, work)
    others = [p for p in platforms if p != host]
    why_others = f"{', '.join(others)}: not from the origin registry, and a CLI-config install serves only {host}"
    if host not in platforms:
        result.unavailable += [registry_error, why_others]
        return []
    progress(f"{cloud}: origin registry failed; terraform init through your CLI config for {host} into {cache}")
    try:
        run_tf([tf, "init", "-backend=false", "-input=false", "-no-color"], work, {"TF_PLUGIN_CACHE_DIR": str(cache)})
    except TerraformError as err:
        result.unavailable += [registry_error, f"CLI config's installation methods: {err}"]
        return []
    result.notes.append(registry_error)
    _materialise(cache, progress)
    result.via = f"terraform init through the CLI config's installation methods ({host} only)"
    if others:
        result.unavailable.append(why_others)
    return [host]


def _materialise(cache: Path, progress: Progress) -> None:
    """Replace the links Terraform's plugin cache makes to a local mirror with the files themselves
    (hard links where the filesystem allows, else copies), so the cache outlives that mirror."""
    for dirpath, dirnames, _ in os.walk(cache):
        for name in dirnames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                continue
            source = path.resolve()
            progress(f"copying {source} into the cache (hard links where possible)")
            tmp = path.with_name(name + ".vmplane-tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(source, tmp, copy_function=_link_or_copy)
            path.unlink()
            tmp.rename(path)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _lock(tf: str, work: Path, cache: Path, platforms: list[str], result: CacheResult) -> list[str]:
    """Lock for every platform the cache can serve; the locked platforms (a missing one is named)."""

    def lock(ps: list[str]) -> None:
        # An empty CLI config: the lock must come from the cache alone.
        empty = work / "empty.tfrc"
        empty.write_text("")
        (work / ".terraform.lock.hcl").unlink(missing_ok=True)  # a lock only of `ps`, not merged
        cmd = [tf, "providers", "lock", "-no-color", f"-fs-mirror={cache}", *(f"-platform={p}" for p in ps)]
        run_tf(cmd, work, {"TF_CLI_CONFIG_FILE": str(empty)})

    try:
        lock(platforms)
        return platforms
    except TerraformError as err:
        if len(platforms) == 1:
            result.unavailable.append(f"{platforms[0]}: {err}")
            return []
    good = []
    for p in platforms:  # find the platform(s) the cache lacks, then lock the rest
        try:
            lock([p])
            good.append(p)
        except TerraformError as err:
            result.unavailable.append(f"{p}: {err}")
    if good:
        lock(good)
    return good


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".vmplane-tmp")
    tmp.write_text(text)
    tmp.replace(path)
