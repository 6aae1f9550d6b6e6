#!/usr/bin/env python3
"""vmplane's boot-time helper: the pinned packages and image of a VM's vmconfig manifest.

Copied into user-data as /usr/local/lib/vmplane/vmconfig.py and run by the bootstrap script with the
image's python3, so it uses the standard library only. `fetch` finds the VM's family in /etc/os-release,
downloads each pinned package (retries, timeout) into a private directory, checks sha256 and size, and
writes the install list; `image` prints the NGINX image reference (by digest). Both fail closed, naming
the artifact: exit 3 when it is unpinned, 4 on a checksum mismatch, 5 when a download keeps failing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

Doc = dict[str, Any]  # a manifest (or part of one) as JSON

UNPINNED, MISMATCH, UNREACHABLE = 3, 4, 5
OS_RELEASE_FAMILY = {("amzn", "2023"): "al2023", ("debian", "12"): "debian-12", ("ubuntu", "24.04"): "ubuntu-24.04"}
ATTEMPTS, TIMEOUT = 5, 60.0
PLAN = "install.list"  # line 1: the package manager; then name, version and file, tab-separated


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def os_release(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip().strip("\"'")
    return out


def family_of(release: dict[str, str]) -> str | None:
    return OS_RELEASE_FAMILY.get((release.get("ID", ""), release.get("VERSION_ID", "")))


def why(manifest: Doc, key: str) -> str:
    unavailable = manifest.get("unavailable", {})
    return unavailable.get(key) or unavailable.get("*") or "not in the manifest"


def pinned_family(manifest: Doc, release: dict[str, str]) -> tuple[str, Doc]:
    family = family_of(release)
    seen = f"{release.get('ID', '?')} {release.get('VERSION_ID', '?')}"
    if family is None:
        raise Failure(
            UNPINNED,
            f"unpinned: os {seen} is not a family vmplane pins ({', '.join(sorted(OS_RELEASE_FAMILY.values()))})",
        )
    entry = manifest.get("families", {}).get(family)
    if entry is None:
        raise Failure(UNPINNED, f"unpinned: family {family} ({seen}): {why(manifest, family)}")
    return family, entry


def image_reference(manifest: Doc) -> str:
    image = manifest.get("images", {}).get("nginx")
    if image is None:
        raise Failure(UNPINNED, f"unpinned: nginx image: {why(manifest, 'nginx')}")
    return f"{image['repository']}@{image['digest']}"


def download(url: str, dest: Path, attempts: int, backoff: float) -> None:
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response, dest.open("wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
            return
        except OSError as err:
            log(f"download attempt {attempt} of {url} failed: {err}")
            if attempt == attempts:
                raise Failure(UNREACHABLE, f"download failed: {url}: {err}") from None
            time.sleep(backoff * 2**attempt)


def verify(package: Doc, path: Path) -> None:
    data = path.read_bytes()
    label = f"{package['name']} {package['version']} {package['url']}"
    got = hashlib.sha256(data).hexdigest()
    if got != package["sha256"]:
        raise Failure(MISMATCH, f"checksum mismatch: {label}: expected sha256 {package['sha256']} got {got}")
    size = package.get("size")
    if size is not None and size != len(data):
        raise Failure(MISMATCH, f"checksum mismatch: {label}: expected {size} bytes got {len(data)}")


def fetch(manifest: Doc, release: dict[str, str], dest: Path, attempts: int = ATTEMPTS, backoff: float = 1.0) -> Path:
    """Download and verify the family's packages into `dest` (private); returns the install list."""
    family, entry = pinned_family(manifest, release)
    if manifest.get("kind") == "nginx":
        image_reference(manifest)  # before downloading anything: an unpinned image fails closed too
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest.chmod(0o700)
    lines = [entry["packageManager"]]
    for package in entry["packages"]:
        name = Path(package["url"].split("?", 1)[0]).name
        target = dest / name
        partial = dest / f".{name}.part"
        download(package["url"], partial, attempts, backoff)
        verify(package, partial)
        partial.replace(target)
        log(f"verified {package['name']} {package['version']} ({family})")
        lines.append(f"{package['name']}\t{package['version']}\t{target}")
    plan = dest / PLAN
    plan.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return plan


def log(message: str) -> None:
    print(f"vmconfig: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("fetch", "image"):
        log("usage: vmconfig.py fetch MANIFEST DIR | image MANIFEST")
        return 2
    try:
        manifest = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        if argv[0] == "image":
            print(image_reference(manifest))
        else:
            release = os_release(Path(os.environ.get("VMPLANE_OS_RELEASE", "/etc/os-release")))
            backoff = float(os.environ.get("VMPLANE_RETRY_BACKOFF", "1"))
            fetch(manifest, release, Path(argv[2]), backoff=backoff)
    except Failure as err:
        log(str(err))
        return err.code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
