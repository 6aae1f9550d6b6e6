"""`vmplane deps download` against local fakes of the Debian/Ubuntu archives, an AL2023 repository and
the Docker registry (tests/deps_servers.py), and one slow test against the real Debian archive."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import deps_servers as fakes

from vmplane.deps import cache, http
from vmplane.deps.download import download, package_path
from vmplane.deps.manifest import AL2023, DEBIAN_12, NGINX, UBUNTU_2404
from vmplane.envspec.models import Arch, BootstrapMode

KINDS = [BootstrapMode.nginx, BootstrapMode.bare]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[fakes.Fake]:
    with fakes.serve("amd64") as f:
        monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", f.mirrors())
        monkeypatch.setattr(http, "BACKOFF", 0.0)
        yield f


def versions(home: Path, kind: BootstrapMode, family: str) -> dict[str, str]:
    m = cache.current(home, kind, Arch.amd64)
    return {p.name: p.version for p in m.families[family].packages}


def test_a_full_download_pins_every_family_and_the_image(fake: fakes.Fake, tmp_path: Path) -> None:
    outcomes, transfer = download(tmp_path, Arch.amd64, KINDS)

    assert [o.complete for o in outcomes] == [True, True]
    nginx = cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64)
    bare = cache.current(tmp_path, BootstrapMode.bare, Arch.amd64)
    assert set(nginx.families) == set(bare.families) == {AL2023, DEBIAN_12, UBUNTU_2404}
    assert nginx.unavailable == bare.unavailable == {}
    # The highest version across the suites: containerd from bookworm, runc from bookworm-security.
    assert versions(tmp_path, BootstrapMode.nginx, DEBIAN_12) == {
        "docker.io": "20.10.24+dfsg1-1+deb12u1+b6",
        "containerd": "1.6.20~ds1-1+deb12u3",
        "runc": "1.1.5+ds1-1+deb12u2",
        "tini": "0.19.0-1+b3",
    }
    debian = nginx.families[DEBIAN_12]
    runc = next(p for p in debian.packages if p.name == "runc")
    assert runc.url.startswith(f"{fake.url}/debian-security/pool/main/r/runc/")
    assert debian.source.suites == ["bookworm", "bookworm-updates", "bookworm-security"]
    assert debian.source.release_date == fakes.RELEASE_DATE
    # Ubuntu's docker.io (noble-updates, universe) does not depend on tini: none is pinned.
    assert versions(tmp_path, BootstrapMode.nginx, UBUNTU_2404) == {
        "docker.io": "26.1.3-0ubuntu1~24.04.1",
        "containerd": "1.7.12-0ubuntu4",
        "runc": "1.1.12-0ubuntu3",
    }
    al2023 = nginx.families[AL2023]
    assert al2023.package_manager == "dnf"
    assert al2023.source.releasever == fakes.AL2023_RELEASEVER
    assert {p.name: p.version for p in al2023.packages}["containerd"] == "1.7.27-1.amzn2023.0.1"
    digests = fakes.add_registry(fakes.Fake())
    assert nginx.images[NGINX].digest == digests["amd64"]
    assert nginx.images[NGINX].tag == fakes.NGINX_TAG
    assert bare.images == {}
    # Every artifact is in the cache under its sha256, with those bytes.
    for family in nginx.families.values():
        for pkg in family.packages:
            assert http.sha256_of(package_path(tmp_path, pkg)) == pkg.sha256
    assert len(transfer.downloaded) == 10 and not transfer.reused


def test_a_second_run_downloads_nothing_and_the_cache_is_additive(fake: fakes.Fake, tmp_path: Path) -> None:
    download(tmp_path, Arch.amd64, KINDS)
    first = set(fake.downloads(".deb")) | set(fake.downloads(".rpm"))
    indexes = len(fake.downloads("Packages.xz"))
    fake.hits.clear()

    outcomes, transfer = download(tmp_path, Arch.amd64, KINDS)

    assert len(first) == 10
    assert transfer.downloaded == [] and len(transfer.reused) == 10
    assert fake.downloads(".deb") == fake.downloads(".rpm") == []
    assert fake.downloads("Packages.xz") == [] and indexes > 0  # kept by sha256 under deps/indexes
    assert all(o.complete for o in outcomes)
    # Unchanged upstream: the second run's manifest pins the same (its generatedAt aside), so the file
    # already cached stays the one file and stays current (cache.save); comparing whole manifests would
    # depend on whether both runs fell in the same second.
    assert len(cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64)) == 1
    assert cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64).digest() == outcomes[0].manifest.digest()


def test_a_package_whose_bytes_differ_from_the_index_is_refused_and_named(fake: fakes.Fake, tmp_path: Path) -> None:
    tini = next(p for p in fake.files if p.endswith(".deb") and "/tini_" in p)
    fake.files[tini] = b"tampered"  # the index still lists the original's sha256

    outcomes, _ = download(tmp_path, Arch.amd64, [BootstrapMode.bare])

    m = outcomes[0].manifest
    assert DEBIAN_12 not in m.families and not outcomes[0].complete
    assert "tini_0.19.0-1+b3_amd64.deb" in m.unavailable[DEBIAN_12]
    assert "refused" in m.unavailable[DEBIAN_12]
    assert not any(p.name.startswith("tini") for p in (tmp_path / "deps" / "packages").rglob("*"))
    assert set(m.families) == {AL2023, UBUNTU_2404}


def test_a_packages_index_that_differs_from_release_is_refused(fake: fakes.Fake, tmp_path: Path) -> None:
    fake.files["/ubuntu/dists/noble/universe/binary-amd64/Packages.xz"] = b"\xfd7zXZ\x00 tampered"

    outcomes, _ = download(tmp_path, Arch.amd64, [BootstrapMode.bare])

    why = outcomes[0].manifest.unavailable[UBUNTU_2404]
    assert "/ubuntu/dists/noble/universe/binary-amd64/Packages.xz" in why and "refused" in why


def test_an_unreachable_source_is_named_and_the_old_entry_kept(
    fake: fakes.Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    download(tmp_path, Arch.amd64, KINDS)
    before = cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64)
    closed = "http://127.0.0.1:9"  # discard: nothing answers
    monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", fake.mirrors(al2023=f"{closed}/al2023", registry=closed))

    outcomes, _ = download(tmp_path, Arch.amd64, KINDS)

    nginx = outcomes[0]
    assert not nginx.complete and nginx.manifest.unavailable == {}
    assert set(nginx.kept) == {AL2023, NGINX}
    assert "127.0.0.1:9" in nginx.kept[AL2023] and "kept the entry" in nginx.kept[AL2023]
    assert nginx.manifest.families[AL2023] == before.families[AL2023]
    assert nginx.manifest.images == before.images
    assert set(outcomes[1].kept) == {AL2023}  # the bare kind has no image to keep


def test_an_unreachable_source_without_an_old_entry_is_unavailable(
    fake: fakes.Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", fake.mirrors(registry="http://127.0.0.1:9"))

    outcomes, _ = download(tmp_path, Arch.amd64, [BootstrapMode.nginx])

    m = outcomes[0].manifest
    assert set(m.unavailable) == {NGINX} and "unreachable" in m.unavailable[NGINX]
    assert m.missing(DEBIAN_12) == [f"nginx image: {m.unavailable[NGINX]}"]


def test_arm64_reads_ubuntu_from_the_ports_archive_and_the_arm64_v8_image(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(http, "BACKOFF", 0.0)
    with fakes.serve("arm64") as f:
        monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", f.mirrors())
        outcomes, _ = download(tmp_path, Arch.arm64, [BootstrapMode.nginx])
    m = outcomes[0].manifest
    assert outcomes[0].complete
    assert all("/ubuntu-ports/" in p.url for p in m.families[UBUNTU_2404].packages)
    assert all(p.url.endswith("_arm64.deb") for p in m.families[DEBIAN_12].packages)
    assert all(p.url.endswith(".aarch64.rpm") for p in m.families[AL2023].packages)
    assert m.images[NGINX].digest == fakes.add_registry(fakes.Fake())["arm64"]


def test_the_command_reports_json_and_exits_3_when_something_is_unavailable(fake: fakes.Fake, tmp_path: Path) -> None:
    env = {
        "VMPLANE_HOME": str(tmp_path),
        "VMPLANE_DEPS_ATTEMPTS": "1",
        "VMPLANE_DEPS_MIRRORS": fake.mirrors(al2023="http://127.0.0.1:9/al2023"),
        "PATH": "/usr/bin:/bin",
    }
    args = [sys.executable, "-m", "vmplane", "deps", "download", "--arch", "amd64", "--kind", "bare", "-o", "json"]

    run = subprocess.run(args, env=env, capture_output=True, text=True, check=False)

    assert run.returncode == 3, run.stderr
    doc = json.loads(run.stdout)
    assert doc["complete"] is False and len(doc["downloaded"]) == 7
    (bare,) = doc["manifests"]
    assert set(bare["unavailable"]) == {AL2023} and "127.0.0.1:9" in bare["unavailable"][AL2023]
    assert "bare.amd64: al2023:" in run.stderr and "downloading" in run.stderr

    env["VMPLANE_DEPS_MIRRORS"] = fake.mirrors()
    again = subprocess.run(args, env=env, capture_output=True, text=True, check=False)

    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["complete"] is True and doc["reused"] == 7 and len(doc["downloaded"]) == 3


@pytest.fixture(scope="session")
def debian_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home per test session: bookworm's ~9 MB Packages.xz is read once, then kept by sha256."""
    return tmp_path_factory.mktemp("deps-real-debian")


@pytest.mark.slow
def test_the_real_debian_archive_pins_and_downloads_tini(debian_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.request

    # The real archive, whatever an earlier test on this worker left: tests/unit's session fixture points the
    # mirrors at a closed port for the rest of the session, and worksteal may run this test after one of those.
    monkeypatch.delenv("VMPLANE_DEPS_MIRRORS", raising=False)

    from vmplane.deps import fetch_apt
    from vmplane.deps.sources import apt_families

    try:
        urllib.request.urlopen("https://deb.debian.org/debian/dists/bookworm/InRelease", timeout=10).close()
    except OSError as err:
        pytest.skip(f"deb.debian.org is unreachable from here: {err}")
    (spec,) = [s for s in apt_families(Arch.amd64) if s.family == DEBIAN_12]

    family = fetch_apt.read_family(spec, Arch.amd64, debian_home / "indexes")

    assert [p.name for p in family.packages] == ["docker.io", "containerd", "runc", "tini"]
    assert family.source.release_date
    tini = family.packages[-1]
    assert tini.url.startswith("https://deb.debian.org/debian/pool/main/t/tini/")
    dest = package_path(debian_home, tini)
    http.download(tini.url, dest, tini.sha256)
    assert http.sha256_of(dest) == tini.sha256 and dest.stat().st_size == tini.size
