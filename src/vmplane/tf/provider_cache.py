"""A generated stack's use of the offline provider cache (`vmplane deps tf`), without the user's CLI config.

With a cached lock for the stack's cloud, the stack gets:
- `.terraform.lock.hcl`: a copy of the cached lock, so `terraform init` installs exactly those hashes;
- `terraform.d/plugins`: a symlink to the cache's provider mirror. It is one of Terraform's implied local
  mirror directories (relative to the directory terraform runs in), consulted whenever the CLI config has
  no `provider_installation` block; it accepts both the packed (`providers mirror`) and unpacked layouts.
  The packages are never copied, and `.terraform` is Terraform's own.
The versions mirrored are the stack's own `terraform` block, rendered by the cloud's stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vmplane.deps import tf_cache
from vmplane.envspec.models import Cloud
from vmplane.tf.hcl import Attr, Block, render
from vmplane.tf.stacks import STACKS

LOCK_FILE = ".terraform.lock.hcl"
PLUGINS_LINK = Path("terraform.d") / "plugins"


@dataclass(frozen=True)
class Attached:
    """What `attach` did to the stack (paths relative to it); `note` says what a user should know."""

    lock: str | None
    plugins: str | None
    note: str


def _settings(cloud: Cloud) -> Block:
    return STACKS[cloud].terraform_settings()


def versions_tf(cloud: Cloud) -> str:
    """The stack's `terraform` block alone: what `deps tf` mirrors and locks."""
    return render([_settings(cloud)])


def required(cloud: Cloud) -> dict[str, str]:
    """Provider source -> version constraint, from the stack's `required_providers`."""
    out: dict[str, str] = {}
    for item in _settings(cloud).body:
        if isinstance(item, Block) and item.type == "required_providers":
            for attr in item.body:
                if isinstance(attr, Attr) and isinstance(attr.value, dict):
                    out[str(attr.value["source"])] = str(attr.value["version"])
    return out


def refresh(home: Path, cloud: Cloud, platforms: list[str], progress: tf_cache.Progress) -> tf_cache.CacheResult:
    return tf_cache.refresh(home, cloud.value, versions_tf(cloud), required(cloud), platforms, progress)


def how_to_cache(cloud: Cloud) -> str:
    return f"vmplane deps tf --cloud {cloud.value} --platform linux_amd64"


def attach(home: Path, cloud: Cloud, stack: Path) -> Attached:
    """Copy the cached lock into `stack` and link its implied plugin mirror to the cache (if there is one)."""
    cached = tf_cache.lock_path(home, cloud.value)
    if not cached.is_file():
        return Attached(
            None,
            None,
            f"no offline provider cache for {cloud.value}: `terraform init` installs through your CLI config; "
            f"`{how_to_cache(cloud)}` makes one",
        )
    lock = stack / LOCK_FILE
    text = cached.read_text()
    if not lock.is_file() or lock.read_text() != text:
        tmp = lock.with_name(lock.name + ".vmplane-tmp")
        tmp.write_text(text)
        tmp.replace(lock)
    link = stack / PLUGINS_LINK
    target = tf_cache.providers_dir(home).resolve()
    if link.is_symlink() or not link.exists():
        if not (link.is_symlink() and link.readlink() == target):
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp_link = link.with_name(link.name + ".vmplane-tmp")
            tmp_link.unlink(missing_ok=True)
            tmp_link.symlink_to(target, target_is_directory=True)
            tmp_link.replace(link)
        note = f"providers from {target} (run terraform in {stack}; `-chdir` skips terraform.d/plugins)"
        return Attached(LOCK_FILE, str(PLUGINS_LINK), note)
    return Attached(LOCK_FILE, None, f"{link} is your own directory: left alone, so the cache is not linked")
