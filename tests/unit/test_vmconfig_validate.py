"""stepValidate and `plan` on unpinned vmconfig artifacts: refused on a real cloud (naming the pool's image
field, the manifest file and the fix), logged on the sandbox; and the job's recorded manifests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vmplane.bootstrap import vmconfig
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import UnsupportedError
from vmplane.deps import cache
from vmplane.deps.manifest import Family, Image, Manifest, Package, PackageSource
from vmplane.envspec.models import Arch, BootstrapMode, EnvSpec
from vmplane.jobs.apply import manifest_changes, unpinned_notes
from vmplane.pipeline import runner
from vmplane.state import InfraConfig
from vmplane.target import Target

DEB = Package(name="docker.io", version="1", url="https://deb.debian.org/x.deb", sha256="a" * 64)
DEBIAN = Family(packageManager="apt", source=PackageSource(repository="https://deb.debian.org/debian"), packages=[DEB])
NGINX = Image(repository="docker.io/library/nginx", tag="1.27.3-alpine", digest="sha256:" + "b" * 64)


def manifest(**extra: Any) -> Manifest:
    return Manifest(
        kind=BootstrapMode.nginx,
        arch=Arch.amd64,
        generatedAt=datetime(2026, 12, 1, tzinfo=UTC),
        families={"debian-12": DEBIAN},
        unavailable={"al2023": "cdn.amazonlinux.com unreachable", "nginx": "registry-1.docker.io unreachable"},
        **extra,
    )


def spec(image: str) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "demo",
            "org": "acme",
            "provider": {"cloud": "aws", "region": "us-east-1"},
            "pools": {"web": {"mode": "fixed", "size": 1, "image": image, "arch": "amd64"}},
            "bootstrap": {"mode": "nginx"},
        }
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VMPLANE_HOME", str(tmp_path))
    cache.save(tmp_path, manifest())
    return tmp_path


def test_problem_names_the_field_the_file_the_reasons_and_the_fix(home: Path) -> None:
    [problem, ways] = vmconfig.problems(spec("al2023"))
    assert problem.startswith("pools.web.image: vmplane.env.vmconfig.nginx.amd64.json does not pin")
    assert "al2023: cdn.amazonlinux.com unreachable" in problem
    assert "nginx image: registry-1.docker.io unreachable" in problem
    assert ways.startswith("ways out: point VMPLANE_DEPS_MIRRORS at a mirror")
    assert "`vmplane deps download --arch amd64` on a machine that reaches the repositories" in ways
    assert f"copy its $VMPLANE_HOME/deps to {home / 'deps'}" in ways
    # The bare manifest of this home is the shipped one: its families are the pinned choice.
    assert "`bootstrap.mode: bare` with an image of a family its manifest pins (debian-12, ubuntu-24.04)" in ways


def test_a_proxmox_pool_is_never_told_to_change_its_image(home: Path) -> None:
    """A Proxmox pool has `template`, not `image`: with the family unknown before boot, what is missing
    (the NGINX image) names the pool; a template labelled with a family alias names `template`."""

    def pve(template: str) -> EnvSpec:
        return EnvSpec.model_validate(
            {
                "name": "demo",
                "org": "acme",
                "provider": {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1"},
                "network": {"cidr": "10.60.0.0/24"},
                "pools": {"web": {"mode": "fixed", "size": 1, "template": template}},
                "bootstrap": {"mode": "nginx"},
                "exec": {"mode": "QemuGuestAgent"},
            }
        )

    [problem, ways] = vmconfig.problems(pve("debian-12-cloud"))
    assert problem.startswith("pools.web: vmplane.env.vmconfig.nginx.amd64.json does not pin what the VMs need")
    [problem, ways] = vmconfig.problems(pve("al2023"))
    assert problem.startswith("pools.web.proxmox.template: ")
    assert ".image" not in problem + ways and "on a template of a pinned family" in ways


def test_pinned_family_and_image_pass(home: Path) -> None:
    cache.save(home, manifest(images={"nginx": NGINX}))
    assert vmconfig.problems(spec("debian-12")) == []
    # An AMI id: the family is known only at boot, so only the image can be checked here.
    assert vmconfig.problems(spec("ami-0123456789abcdef0")) == []


class FakeDriver:
    def validate(self, spec: EnvSpec) -> list[str]:
        return []

    def preflight(self, ctx: Context) -> None:
        pass


def run_validate(s: EnvSpec, target: Target) -> list[str]:
    log: list[str] = []
    ctx = Context(job_id="job-1", spec=s, infra=InfraConfig(), tagger=Tagger.for_spec(s, "job-1"), log=log.append)
    runner._validate(FakeDriver(), ctx, SimpleNamespace(target=target))  # type: ignore[arg-type]
    return log


def test_step_validate_refuses_on_a_real_cloud(home: Path) -> None:
    real = Target(cloud="aws", region="us-east-1")
    with pytest.raises(UnsupportedError, match=r"pools\.web\.image: vmplane\.env\.vmconfig\.nginx\.amd64\.json"):
        run_validate(spec("al2023"), real)
    assert unpinned_notes(spec("al2023"), real)[0].startswith("stepValidate will refuse: pools.web.image:")


def test_step_validate_on_the_sandbox_logs_and_goes_on(home: Path) -> None:
    sandbox = Target(cloud="aws", region="us-east-1", endpoint_url="http://127.0.0.1:4566")
    [note] = run_validate(spec("al2023"), sandbox)
    assert note.startswith("sandbox: a real VM would fail closed here: pools.web.image:")
    assert unpinned_notes(spec("al2023"), sandbox) == [note]


def test_manifest_changes_against_the_recorded_ones(home: Path) -> None:
    s = spec("debian-12")
    job = SimpleNamespace(config={"vmconfig": vmconfig.record(s)})
    assert manifest_changes(job, s) == []  # type: ignore[arg-type]
    before = cache.current(home, BootstrapMode.nginx, Arch.amd64).digest()
    cache.save(home, manifest(images={"nginx": NGINX}))
    [change] = manifest_changes(job, s)  # type: ignore[arg-type]
    assert (change.path, change.impact.value, change.old) == ("vmconfig.nginx.amd64", "vm", before[:12])
    # A job recorded before manifests existed: no change claimed.
    assert manifest_changes(SimpleNamespace(config={}), s) == []  # type: ignore[arg-type]


def test_bootstrap_timeout_names_what_the_bootstrap_logged() -> None:
    from vmplane.clouds.base import bootstrap_timed_out
    from vmplane.state import VMRecord, VMState

    s = spec("debian-12")
    vms = [
        VMRecord(Name="demo-web-0", Pool="web", Index=0, State=VMState.bootstrap),
        VMRecord(Name="demo-web-1", Pool="web", Index=1),
    ]
    ctx = Context(job_id="job-1", spec=s, infra=InfraConfig(VMs=vms), tagger=Tagger.for_spec(s, "job-1"))
    reasons = {"demo-web-0": "vmconfig: unpinned: family al2023 (amzn 2023): unreachable\nFAILED: sentinel not written"}
    err = bootstrap_timed_out(ctx, vms, 600, reasons)
    assert (
        "the bootstrap logged: demo-web-0: vmconfig: unpinned: family al2023 (amzn 2023): unreachable / FAILED"
        in str(err)
    )
    assert vms[0].State is VMState.failed


def test_a_job_renders_the_manifest_it_recorded_not_a_newer_current_one(home: Path) -> None:
    """A `deps download` while a job runs (or before its resume) must not change what its VMs boot with:
    only an update adopts the new manifest."""
    s = spec("debian-12")
    recorded = vmconfig.recorded_digests({"vmconfig": vmconfig.record(s)})
    first = cache.current(home, BootstrapMode.nginx, Arch.amd64)
    assert recorded == {"web": first.digest()}
    newer = manifest(images={"nginx": NGINX}).model_copy(update={"generated_at": datetime(2026, 12, 2, tzinfo=UTC)})
    cache.save(home, newer)
    assert vmconfig.pool_manifest(s, "web") == newer
    assert vmconfig.job_manifest(s, "web", recorded) == first
    assert vmconfig.job_manifest(s, "web", {}) == newer  # a job recorded before manifests existed
    assert vmconfig.job_manifest(s, "web", {"web": "0" * 64}) == newer  # gone from the cache: the current one
    assert vmconfig.recorded_digests({}) == {} and vmconfig.recorded_digests({"vmconfig": None}) == {}


def test_validation_judges_the_manifest_the_job_recorded(home: Path) -> None:
    """stepValidate checks what the VMs will render: a newer current manifest that pins the image does
    not hide that the job's recorded one does not."""
    s = spec("debian-12")
    recorded = vmconfig.recorded_digests({"vmconfig": vmconfig.record(s)})
    cache.save(
        home, manifest(images={"nginx": NGINX}).model_copy(update={"generated_at": datetime(2026, 12, 2, tzinfo=UTC)})
    )
    assert vmconfig.problems(s) == []  # the current one pins everything
    [problem, _ways] = vmconfig.problems(s, recorded=recorded)
    assert "nginx image: registry-1.docker.io unreachable" in problem


def test_the_digest_covers_what_is_pinned_not_when_it_was_read(home: Path) -> None:
    later = manifest().model_copy(update={"generated_at": datetime(2026, 12, 9, tzinfo=UTC)})
    assert later.digest() == manifest().digest() and later.dumps() != manifest().dumps()
    assert manifest(images={"nginx": NGINX}).digest() != manifest().digest()
    # Saving the same content read later keeps the current file (so the user-data stays byte for byte).
    first = cache.saved(home, BootstrapMode.nginx, Arch.amd64)
    assert cache.save(home, later) == first[0]
    assert cache.saved(home, BootstrapMode.nginx, Arch.amd64) == first
    assert cache.current(home, BootstrapMode.nginx, Arch.amd64).dumps() == manifest().dumps()


def test_a_job_recorded_with_the_old_digest_finds_its_manifest_and_sees_no_change(home: Path) -> None:
    """vmplane 0.2.0 recorded sha256 of the whole file (generatedAt included) and named the file by it."""
    old_home = home / "old"
    s = spec("debian-12")
    m = manifest()
    folder = cache.manifest_dir(old_home, m.kind, m.arch)
    folder.mkdir(parents=True)
    (folder / f"20261201T000000Z-{m.legacy_digest()[:12]}.json").write_text(m.dumps())
    (folder / cache.CURRENT).write_text(f"20261201T000000Z-{m.legacy_digest()[:12]}.json\n")
    assert m.legacy_digest() != m.digest()
    job = SimpleNamespace(config={"vmconfig": {"web": {"file": m.filename, "digest": m.legacy_digest()}}})
    recorded = vmconfig.recorded_digests(job.config)
    assert vmconfig.job_manifest(s, "web", recorded, old_home) == m
    assert cache.by_digest(old_home, m.kind, m.arch, m.digest()) == m  # a new record of the old file, too
    assert vmconfig.same_manifest(s, "web", m.legacy_digest(), m.digest(), old_home)
    assert not vmconfig.same_manifest(s, "web", m.legacy_digest(), "0" * 64, old_home)
