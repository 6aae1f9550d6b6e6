"""The vmconfig manifest model and its additive cache."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from vmplane.deps import cache
from vmplane.deps.manifest import Family, Image, Manifest, Package, PackageSource, family_of_image
from vmplane.envspec.models import Arch, BootstrapMode

SHA = "0" * 63 + "1"


def manifest(when: datetime, version: str = "20.10.24+dfsg1-1+deb12u1") -> Manifest:
    pkg = Package(name="docker.io", version=version, url="https://deb.debian.org/debian/pool/d.deb", sha256=SHA)
    source = PackageSource(repository="https://deb.debian.org/debian", suites=["bookworm"])
    return Manifest(
        kind=BootstrapMode.nginx,
        arch=Arch.amd64,
        generated_at=when,
        families={"debian-12": Family(package_manager="apt", source=source, packages=[pkg])},
        images={"nginx": Image(repository="docker.io/library/nginx", tag="1.27.3-alpine", digest="sha256:" + SHA)},
        unavailable={"al2023": "cdn.amazonlinux.com: connection refused"},
    )


def test_canonical_json_round_trips_and_names_the_file() -> None:
    m = manifest(datetime(2026, 12, 1, tzinfo=UTC))
    text = m.dumps()
    assert cache.parse(text, "m.json") == m
    assert text == cache.parse(text, "m.json").dumps()  # equal manifests, equal bytes
    assert '"schemaVersion": 1' in text and '"packageManager": "apt"' in text
    assert m.filename == "vmplane.env.vmconfig.nginx.amd64.json"
    assert m.images["nginx"].reference == "docker.io/library/nginx@sha256:" + SHA


def test_missing_names_what_a_vm_would_find_unpinned() -> None:
    m = manifest(datetime(2026, 12, 1, tzinfo=UTC))
    assert m.missing("debian-12") == []
    assert m.missing("al2023") == ["al2023: cdn.amazonlinux.com: connection refused"]
    bare = m.model_copy(update={"kind": BootstrapMode.bare, "images": {}})
    assert bare.missing(None) == []  # the bare kind runs no NGINX
    assert m.model_copy(update={"images": {}}).missing(None) == ["nginx image: not in the manifest"]
    assert (family_of_image("ubuntu-24.04"), family_of_image("ami-0123")) == ("ubuntu-24.04", None)


def test_a_bad_checksum_or_field_is_refused_naming_the_file_and_field() -> None:
    text = manifest(datetime(2026, 12, 1, tzinfo=UTC)).dumps().replace(SHA, "xyz", 1)
    with pytest.raises(cache.ManifestError, match=r"^m\.json: .*families\.debian-12\.packages\.0\.sha256"):
        cache.parse(text, "m.json")


def test_the_cache_is_additive_and_current_is_the_last_saved(tmp_path: Path) -> None:
    old = manifest(datetime(2026, 11, 1, tzinfo=UTC), "20.10.24+dfsg1-1")
    new = manifest(datetime(2026, 12, 1, tzinfo=UTC))
    first = cache.save(tmp_path, old)
    second = cache.save(tmp_path, new)
    assert cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64) == [first, second]
    assert cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64) == new
    assert cache.save(tmp_path, old) == first  # saving it again re-points current, writes nothing new
    assert cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64) == old
    assert len(cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64)) == 2


def test_without_a_cache_the_shipped_manifest_or_an_empty_one_is_current(tmp_path: Path) -> None:
    for kind in BootstrapMode:
        for arch in Arch:
            got = cache.current(tmp_path, kind, arch)
            shipped = cache.builtin(kind, arch)
            if shipped is not None:
                assert got == shipped
            else:
                assert got.families == {} and "vmplane deps download" in got.why_unpinned("debian-12")
