"""The fetchers' edges: mirrors settings, metadata formats vmplane refuses, and the registry's checks."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator

import pytest
from tests import deps_servers as fakes

from vmplane.deps import fetch_apt, fetch_dnf, fetch_registry, http, sources
from vmplane.envspec.models import Arch
from vmplane.errors import UsageError


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[fakes.Fake]:
    with fakes.serve("amd64") as f:
        monkeypatch.setenv(sources.MIRRORS_ENV, f.mirrors())
        monkeypatch.setattr(http, "BACKOFF", 0.0)
        yield f


@pytest.mark.parametrize(
    ("value", "error"),
    [("{", "not JSON"), ('["x"]', "JSON object"), ('{"debain": "http://m"}', "unknown name(s) debain")],
)
def test_a_bad_mirrors_setting_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, value: str, error: str) -> None:
    monkeypatch.setenv(sources.MIRRORS_ENV, value)
    with pytest.raises(UsageError, match=re.escape(error)):
        sources.mirrors()


def test_a_mirror_replaces_only_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sources.MIRRORS_ENV, '{"debian": "https://mirror.example/debian/"}')
    got = sources.mirrors()
    assert got["debian"] == "https://mirror.example/debian"
    assert got["debian-security"] == sources.DEFAULT_MIRRORS["debian-security"]


def test_release_parsing_reads_a_clearsigned_inrelease() -> None:
    text = (
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Debian\nDate: Sat, 09 Nov 2024 10:41:21 UTC\n"
        "MD5Sum:\n 0123 10 main/binary-amd64/Packages.xz\nSHA256:\n"
        f" {'a' * 64} 10 main/binary-amd64/Packages.xz\n {'b' * 64} 20 main/binary-arm64/Packages.xz\n"
        "-----BEGIN PGP SIGNATURE-----\n\nxyz\n-----END PGP SIGNATURE-----\n"
    )
    release = fetch_apt.parse_release(text)
    assert release.date == "Sat, 09 Nov 2024 10:41:21 UTC"
    assert release.sha256 == {"main/binary-amd64/Packages.xz": "a" * 64, "main/binary-arm64/Packages.xz": "b" * 64}


def test_depends_keeps_names_and_drops_versions_alternatives_and_archs() -> None:
    fields = {"Depends": "libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0, runc:amd64 (>= 1.0.0~rc8~), tini"}
    assert fetch_apt.depends_on(fields) == {"libc6", "debconf", "debconf-2.0", "runc", "tini"}


def test_zstd_primary_metadata_is_named_as_unsupported(fake: fakes.Fake) -> None:
    base = f"/al2023-repo/{fakes.AL2023_RELEASEVER}/x86_64"
    repomd = fake.files[f"{base}/repodata/repomd.xml"].replace(b"-primary.xml.gz", b"-primary.xml.zst")
    fake.files[f"{base}/repodata/repomd.xml"] = repomd
    href, _ = fetch_dnf.primary_location(repomd, "repomd")
    fake.files[f"{base}/{href}"] = next(v for k, v in fake.files.items() if k.endswith("-primary.xml.gz"))
    with pytest.raises(http.FetchError, match="zstd-compressed metadata is not supported"):
        fetch_dnf.read_family(Arch.amd64, None)


def test_a_primary_index_that_differs_from_repomd_is_refused(fake: fakes.Fake) -> None:
    path = next(k for k in fake.files if k.endswith("-primary.xml.gz"))
    fake.files[path] = gzip.compress(b"<metadata/>")
    with pytest.raises(http.FetchError, match=r"primary\.xml\.gz: sha256 .* refused"):
        fetch_dnf.read_family(Arch.amd64, None)


def test_a_platform_manifest_whose_bytes_differ_from_its_digest_is_refused(fake: fakes.Fake) -> None:
    digest = fakes.add_registry(fakes.Fake())["amd64"]
    fake.files[f"/registry/v2/library/nginx/manifests/{digest}"] = b'{"tampered": true}'
    with pytest.raises(http.FetchError, match="refused") as err:
        fetch_registry.read_image(Arch.amd64)
    assert fakes.TOKEN not in str(err.value)


def test_an_index_without_the_platform_names_it() -> None:
    index = {
        "manifests": [
            {"digest": "sha256:" + "a" * 64, "platform": {"os": "linux", "architecture": "arm64", "variant": "v7"}}
        ]
    }
    with pytest.raises(http.FetchError, match="no linux/arm64/v8 manifest"):
        fetch_registry.platform_digest(index, Arch.arm64, "index")
    index["manifests"][0]["platform"]["variant"] = "v8"
    assert fetch_registry.platform_digest(index, Arch.arm64, "index") == "sha256:" + "a" * 64


def test_a_transient_server_error_is_retried_and_a_missing_file_is_not(fake: fakes.Fake) -> None:
    path = "/debian/dists/bookworm/InRelease"
    fake.fail_once[path] = 503
    body = http.get(f"{fake.url}{path}").body
    assert body.startswith(b"-----BEGIN PGP SIGNED MESSAGE-----") and fake.hits.count(path) == 2

    with pytest.raises(http.FetchError, match="HTTP 404"):
        http.get(f"{fake.url}/debian/dists/nowhere/InRelease")
    assert fake.hits.count("/debian/dists/nowhere/InRelease") == 1
