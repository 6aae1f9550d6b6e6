"""`vmconfig_fetch`: what the pools need and the cache lacks, fetched with `deps download`'s fetchers from
local fake upstreams (tests/deps_servers.py), on the shipped manifests; the sandbox never fetches; and
`deps download` over the same upstream content leaves the same `current`.
(The apply on a real target, with its record, is tests/proxmox/test_pve_vmconfig_fetch.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests import deps_servers as fakes
from tests.helpers import EXAMPLES, Cli, Sandbox, free_port
from tests.integration import test_deps_download

from vmplane.bootstrap import vmconfig_fetch
from vmplane.deps import cache
from vmplane.deps import download as download_mod
from vmplane.deps.download import download
from vmplane.deps.manifest import AL2023, DEBIAN_12, NGINX
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Arch, BootstrapMode, EnvSpec
from vmplane.jobs.apply import plan_apply
from vmplane.settings import Settings
from vmplane.target import Target

CLOSED = "http://127.0.0.1:9"
fake = test_deps_download.fake  # the fixture: the fake upstreams, VMPLANE_DEPS_MIRRORS at them


def web(**pool: Any) -> EnvSpec:
    """examples/web.jsonc (AWS, al2023, nginx) with its pool's fields replaced."""
    spec = load_spec(EXAMPLES / "web.jsonc")
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    for p in doc["pools"].values():
        p.update(pool)
    return EnvSpec.model_validate(doc)


def test_the_shipped_defaults_lack_al2023_and_the_image_and_the_fetch_pins_them(
    fake: fakes.Fake, tmp_path: Path
) -> None:
    said: list[str] = []
    spec = load_spec(EXAMPLES / "web.jsonc")
    assert vmconfig_fetch.needed(spec) == {(BootstrapMode.nginx, Arch.amd64): {AL2023, NGINX}}

    assert vmconfig_fetch.fetch_missing(spec, tmp_path, said.append) == []

    m = cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64)
    assert m.families[AL2023].source.releasever == fakes.AL2023_RELEASEVER
    assert m.images[NGINX].digest == fakes.add_registry(fakes.Fake())["amd64"]
    assert m.unavailable == {}  # the shipped reasons for al2023 and nginx are gone with them
    assert any("fetching the pinning metadata only" in s for s in said) and any("pinned" in s for s in said)
    assert fake.downloads(".rpm") == []  # metadata only
    hits = len(fake.hits)
    assert vmconfig_fetch.fetch_missing(spec, tmp_path, said.append) == []
    assert len(fake.hits) == hits  # complete: nothing read again
    # The bare kind and arm64 are not touched: no pool needs them.
    assert not cache.saved(tmp_path, BootstrapMode.bare, Arch.amd64)


def test_an_unreachable_part_keeps_what_was_read_and_names_the_url_tried(
    fake: fakes.Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VMPLANE_DEPS_MIRRORS", fake.mirrors(registry=CLOSED))
    spec = load_spec(EXAMPLES / "web.jsonc")

    [left] = vmconfig_fetch.fetch_missing(spec, tmp_path)

    assert left.pool == "web" and left.field == "pools.web"  # al2023 is pinned now: only the image is missing
    assert left.missing == [
        f"nginx image: {CLOSED}/v2/library/nginx/manifests/{fakes.NGINX_TAG}: unreachable"
        " ([Errno 111] Connection refused)"
    ]
    assert AL2023 in cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64).families
    with pytest.raises(vmconfig_fetch.UnpinnedError, match=r"pools\.web: .*Nothing was recorded\. Ways out: "):
        vmconfig_fetch.refuse_unpinned(spec, tmp_path)


def test_a_bare_pool_needs_only_its_family(fake: fakes.Fake, tmp_path: Path) -> None:
    spec = web()
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["bootstrap"] = {"mode": "bare"}
    doc.pop("loadBalancer", None)
    bare = EnvSpec.model_validate(doc)
    assert vmconfig_fetch.needed(bare) == {(BootstrapMode.bare, Arch.amd64): {AL2023}}
    assert vmconfig_fetch.fetch_missing(bare, tmp_path) == []
    assert not [h for h in fake.hits if h.startswith("/registry")]
    # A family the shipped manifest pins (debian-12) is not read: only the image is lacking.
    shipped = cache.current(tmp_path / "fresh", BootstrapMode.nginx, Arch.amd64)
    assert vmconfig_fetch.needed(web(image=DEBIAN_12)) == {(BootstrapMode.nginx, Arch.amd64): {DEBIAN_12, NGINX}}
    assert vmconfig_fetch.lacking(shipped, {DEBIAN_12, NGINX}) == [NGINX]


@pytest.mark.sandbox
def test_the_sandbox_never_fetches(fake: fakes.Fake, sandbox: Sandbox, tmp_path: Path) -> None:
    """Nothing boots on the sandbox: `plan_apply` keeps the notes and reads nothing from the upstreams (it
    stays offline); it asks the sandbox only what stepValidate would refuse."""
    said: list[str] = []
    spec = load_spec(EXAMPLES / "web.jsonc")
    ap = plan_apply(Settings(home=tmp_path), spec, Target.for_spec(spec, sandbox.endpoint), say=said.append)
    assert fake.hits == [] and not [m for m in said if "fetch" in m or "reading" in m]
    assert any(n.startswith("sandbox: a real VM would fail closed here: pools.web.image:") for n in ap.plan.notes)
    assert not cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64)


def test_the_cli_plan_on_the_sandbox_stays_offline(fake: fakes.Fake, tmp_path: Path) -> None:
    cli = Cli(home=tmp_path / "home", sandbox_port=free_port())
    proc = cli.run(
        "plan", "-f", str(EXAMPLES / "web.jsonc"), "--sandbox", extra_env={"VMPLANE_DEPS_MIRRORS": fake.mirrors()}
    )
    assert proc.returncode == 0, proc.stderr
    assert fake.hits == [] and "fetching" not in proc.stderr


def test_deps_download_over_the_same_upstream_leaves_the_same_current(
    fake: fakes.Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    download(tmp_path, Arch.amd64, [BootstrapMode.nginx])
    pointer = cache.manifest_dir(tmp_path, BootstrapMode.nginx, Arch.amd64) / cache.CURRENT
    first, before = pointer.read_text(), cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64)

    class Later(datetime):  # a re-run a day later: generatedAt would differ
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + timedelta(days=1)

    monkeypatch.setattr(download_mod, "datetime", Later)
    outcomes, _ = download(tmp_path, Arch.amd64, [BootstrapMode.nginx])

    assert outcomes[0].manifest.generated_at > before.generated_at  # read again, later ...
    assert outcomes[0].manifest.digest() == before.digest()  # ... the same content
    assert pointer.read_text() == first and len(cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64)) == 1
    assert cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64) == before  # byte for byte: the same user-data

    # New upstream content is a new current manifest.
    newer = [*fakes.BOOKWORM_SECURITY, fakes.Deb("runc", "1.1.5+ds1-1+deb12u3")]
    fakes.add_apt_suite(fake, "debian-security", "bookworm-security", "amd64", newer)
    download(tmp_path, Arch.amd64, [BootstrapMode.nginx])
    assert pointer.read_text() != first and len(cache.saved(tmp_path, BootstrapMode.nginx, Arch.amd64)) == 2
    assert cache.current(tmp_path, BootstrapMode.nginx, Arch.amd64).digest() != before.digest()
