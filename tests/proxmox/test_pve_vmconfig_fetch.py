"""Manifests fetch themselves (issue 23, item 1), through the real CLI against fakepve, which is a real
target to vmplane (not its sandbox). A fresh home has only the shipped manifests, which leave AL2023 and
the NGINX image unpinned: `apply` reads them from local fake upstreams (an apt archive, an AL2023
repository, a registry: tests/deps_servers.py, via VMPLANE_DEPS_MIRRORS), pins them in the cache, records
them in the job and boots the VMs with them. An unreachable source is refused before any job or request.
And `deps download` over the same upstream content changes nothing (item 2): `plan` shows no change.

What the fakes cannot know: the packages and the digest are made up (nothing boots on fakepve), so what is
shown is that vmplane read, pinned and delivered them, not that a VM could install them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import deps_servers as fakes
from tests.proxmox.fakecluster import Serving, add_template, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.pve_cli import PveCli, mutating, pve_cli, write_pve_env

from vmplane.bootstrap.vmconfig import gz_b64
from vmplane.deps import cache
from vmplane.deps.manifest import AL2023, DEBIAN_12, NGINX, UBUNTU_2404
from vmplane.envspec.models import Arch, BootstrapMode

# Templates named for a family alias: the pool's image label (and so its family) is the template's name.
TEMPLATES = {"debian-12": 9001, "al2023": 9002}
POOL = {"mode": "fixed", "size": 1, "cores": 2, "memoryMb": 2048, "diskGb": 20}
POOLS = {"web": {**POOL, "template": "debian-12"}, "api": {**POOL, "template": "al2023"}}
CLOSED = "http://127.0.0.1:9"  # discard: nothing answers, the connection is refused at once


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    # SDN stored: a plan of the applied environment reads the cluster back first (drift).
    with serve(tmp_path, sdn=True) as serving:
        serving.run(lambda: [add_template(serving.pve, vmid, name) for name, vmid in TEMPLATES.items()])
        player = GuestPlayer(serving).start()
        try:
            yield serving, player
        finally:
            player.stop()


@pytest.fixture
def upstream() -> Iterator[fakes.Fake]:
    with fakes.serve("amd64") as fake:
        yield fake


def cli_for(tmp_path: Path, mirrors: str) -> PveCli:
    return dataclasses.replace(pve_cli(tmp_path), mirrors=mirrors)


@pytest.mark.slow
def test_an_apply_on_a_fresh_home_fetches_pins_and_records_what_the_pools_need(
    cluster: tuple[Serving, GuestPlayer], upstream: fakes.Fake, tmp_path: Path
) -> None:
    serving, _player = cluster
    cli = cli_for(tmp_path, upstream.mirrors())
    assert not cache.saved(cli.home, BootstrapMode.nginx, Arch.amd64)  # a fresh home: the shipped manifest
    env_file = write_pve_env(tmp_path, serving, "pvf", pools=POOLS)

    proc = cli.run("apply", "-f", str(env_file), "--yes", "--output", "json")

    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    job = json.loads(proc.stdout)
    assert job["status"] == "succeeded", job["error"]
    assert "vmconfig nginx.amd64: al2023, nginx not pinned in" in proc.stderr  # progress, on stderr
    assert "fetching the pinning metadata only" in proc.stderr
    pinned = cache.current(cli.home, BootstrapMode.nginx, Arch.amd64)
    assert pinned.families[AL2023].source.releasever == fakes.AL2023_RELEASEVER
    assert all(p.url.startswith(f"{upstream.url}/al2023-repo/") for p in pinned.families[AL2023].packages)
    assert pinned.images[NGINX].digest == fakes.add_registry(fakes.Fake())["amd64"]
    assert AL2023 not in pinned.unavailable and NGINX not in pinned.unavailable
    # debian-12 was pinned already (shipped), as was ubuntu-24.04, which no pool needs: kept, not read.
    shipped = cache.builtin(BootstrapMode.nginx, Arch.amd64)
    assert shipped is not None
    assert pinned.families[DEBIAN_12] == shipped.families[DEBIAN_12]
    assert pinned.families[UBUNTU_2404] == shipped.families[UBUNTU_2404]
    assert not [h for h in upstream.hits if h.startswith(("/debian", "/ubuntu"))]
    assert "/al2023/latest/x86_64/mirror.list" in upstream.hits
    assert f"/registry/v2/library/nginx/manifests/{fakes.NGINX_TAG}" in upstream.hits
    # Metadata only: each VM downloads its packages from the pinned URLs; `deps download` fills the cache.
    assert upstream.downloads(".rpm") == [] and not (cli.home / "deps" / "packages").exists()
    # Recorded: each pool's manifest by its digest, and that manifest is what each VM's ISO carries.
    assert job["config"]["vmconfig"] == {
        pool: {"file": pinned.filename, "digest": pinned.digest()} for pool in ("api", "web")
    }
    isos = serving.run(lambda: dict(serving.pve.files))
    carried = gz_b64(pinned.dumps()).encode()
    assert len(job["config"]["infra"]["Cloud"]["Isos"]) == 2
    assert all(carried in isos[iso] for iso in job["config"]["infra"]["Cloud"]["Isos"].values())

    hits = len(upstream.hits)
    plan = cli.run("plan", "-f", str(env_file), "--output", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["decision"] == "no_changes"
    assert len(upstream.hits) == hits  # pinned now: nothing is fetched again
    assert cli.json("destroy", "-f", str(env_file), "--yes")["status"] == "deleted"


def test_an_unreachable_source_refuses_before_any_job_or_request(
    cluster: tuple[Serving, GuestPlayer], upstream: fakes.Fake, tmp_path: Path
) -> None:
    serving, _player = cluster
    cli = cli_for(tmp_path, upstream.mirrors(al2023=f"{CLOSED}/al2023", registry=CLOSED))
    env_file = write_pve_env(tmp_path, serving, "pvu", pools=POOLS)
    jobs_before = cli.run("jobs", "--output", "json").stdout
    serving.run(serving.pve.requests.clear)

    proc = cli.run("apply", "-f", str(env_file), "--yes", "--output", "json")

    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    err = " ".join(proc.stderr.split())
    # The pool and its field (a Proxmox pool has `template`, never `image`), what is unpinned, the URL tried.
    assert "pools.api.proxmox.template: vmplane.env.vmconfig.nginx.amd64.json does not pin" in err, err
    assert f"al2023: {CLOSED}/al2023/latest/x86_64/mirror.list: unreachable" in err, err
    assert f"nginx image: {CLOSED}/v2/library/nginx/manifests/{fakes.NGINX_TAG}: unreachable" in err, err
    assert "pools.web: " in err and ".image" not in err  # web's family (debian-12) is pinned: only the image
    # The ways out.
    assert "VMPLANE_DEPS_MIRRORS" in err and "`vmplane deps download --arch amd64`" in err, err
    assert f"copy its $VMPLANE_HOME/deps to {cli.home / 'deps'}" in err and "`bootstrap.mode: bare`" in err
    assert "Nothing was recorded" in err and proc.stdout == ""
    assert cli.run("jobs", "--output", "json").stdout == jobs_before
    assert json.loads(jobs_before)["jobs"] == []
    assert serving.run(lambda: list(serving.pve.requests)) == [] and mutating(serving) == []
    assert not cache.saved(cli.home, BootstrapMode.nginx, Arch.amd64)  # nothing pinned: the cache as it was

    plan = cli.run("plan", "-f", str(env_file))
    assert plan.returncode == 2 and " ".join(plan.stderr.split()).count("does not pin") == 2, plan.stderr


@pytest.mark.slow
def test_deps_download_again_over_the_same_upstream_changes_nothing(
    cluster: tuple[Serving, GuestPlayer], upstream: fakes.Fake, tmp_path: Path
) -> None:
    serving, _player = cluster
    cli = cli_for(tmp_path, upstream.mirrors())
    download = ("deps", "download", "--arch", "amd64", "--kind", "nginx")
    assert cli.json(*download)["complete"] is True
    pointer = cache.manifest_dir(cli.home, BootstrapMode.nginx, Arch.amd64) / cache.CURRENT
    first = pointer.read_text()
    env_file = write_pve_env(tmp_path, serving, "pvi", pools=POOLS)
    job = cli.json("apply", "-f", str(env_file), "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]

    again = cli.json(*download)

    assert again["complete"] is True and again["downloaded"] == [] and again["reused"] == 10  # every package
    assert pointer.read_text() == first  # the same file stays current: the same bytes, the same user-data
    assert len(cache.saved(cli.home, BootstrapMode.nginx, Arch.amd64)) == 1
    plan = cli.run("plan", "-f", str(env_file), "--output", "json")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert (doc["decision"], doc["changes"]) == ("no_changes", [])
    recorded = {v["digest"] for v in job["config"]["vmconfig"].values()}
    assert recorded == {cache.current(cli.home, BootstrapMode.nginx, Arch.amd64).digest()}
    assert cli.json("destroy", "-f", str(env_file), "--yes")["status"] == "deleted"
