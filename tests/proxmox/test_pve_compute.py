"""stepCreateLaunchTemplate + stepCreateVMs + teardown on fakepve, with the guest player booting clones
from the ISO vmplane uploads (nothing boots on the fake: readiness is the player answering the agent)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from tests.proxmox.conftest import JOB_ID, make_ctx, make_spec, network_ready, pve_for, writes
from tests.proxmox.fakecluster import TEMPLATE_VMID, Serving, serve, token_env
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import Context
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.proxmox import compute, naming, readiness, templates
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.proxmox.templates import pool_user_data
from vmplane.clouds.proxmox.vms import cluster_vms
from vmplane.state import VMRecord, VMState


def clones(serving: Serving) -> dict[int, object]:
    return serving.run(lambda: {vm.vmid: vm for vm in serving.pve.vms if not vm.template})  # type: ignore[no-any-return]


def apply(pve: Pve, ctx: Context) -> None:
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)


def test_clones_are_configured_behind_the_firewall_and_ready_through_the_iso(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    apply(pve, ctx)
    ids = pve_ids(ctx.infra)
    assert [v.State for v in ctx.infra.VMs] == [VMState.ready, VMState.ready]
    assert any(readiness.SIMULATED_NOTE in n for n in ctx.notes)  # the player wrote the sentinel: said so
    assert {v.PrivateIP for v in ctx.infra.VMs} == {"192.0.2.10"}  # what the fake's agent reports for eth0
    assert ctx.infra.LaunchTemplateID["web"].startswith(f"{TEMPLATE_VMID}@")
    assert ctx.infra.LaunchTemplateVersion["web"] == 1
    listed = {r["name"]: r for r in cluster_vms(pve) if not r.get("template")}
    assert sorted(listed) == ["demo-web-0", "demo-web-1"]
    user_data = pool_user_data(ctx, "web")
    for rec in ctx.infra.VMs:
        vmid = int(str(rec.ID))
        assert listed[rec.Name]["pool"] == ids.Pool
        config = pve.get(f"nodes/pve1/qemu/{vmid}/config")
        tags = ctx.tagger.tags("vm", rec.Name)
        assert config["tags"].split(";") == naming.tag_tokens(tags)
        assert naming.tags_from_description(config["description"]) == tags
        assert str(config["cores"]) == "2" and str(config["memory"]) == "2048"
        assert config["net0"].startswith("virtio=") and config["net0"].endswith(",bridge=vmbr0,firewall=1")
        assert config["ide3"].startswith(f"local:iso/{naming.iso_name(vmid)},media=cdrom")
        assert config["agent"] in ("enabled=1", "1")
        options = pve.get(f"nodes/pve1/qemu/{vmid}/firewall/options")
        assert (int(options["enable"]), options["policy_in"]) == (1, "DROP")
        rules = pve.get(f"nodes/pve1/qemu/{vmid}/firewall/rules")
        assert [(r["type"], r["action"]) for r in rules] == [("group", ctx.infra.VMSecurityGroupID)]
        assert guest.booted[vmid]["user-data"] == user_data
        assert f"instance-id: {vmid}-" in guest.booted[vmid]["meta-data"]
        assert ids.Isos[rec.Name] == f"local:iso/{naming.iso_name(vmid)}"
    resizes = [b for m, p, b in writes(cluster) if m == "PUT" and p.endswith("/resize")]
    assert len(resizes) == 2 and all(b.get("size") == "10G" and b.get("disk") == "scsi0" for b in resizes)

    # A re-run changes nothing: no clone, upload, config or rule.
    before = len(cluster.pve.requests)
    apply(pve, ctx)
    again = [(m, p) for m, p, _ in writes(cluster, before) if not p.endswith("/resize")]
    assert again == []  # the fake does not store a resize: that call alone repeats there
    assert len(clones(cluster)) == 2


def test_a_config_change_bumps_the_version_and_shows_outdated_vms(pve: Pve, ctx: Context, guest: GuestPlayer) -> None:
    apply(pve, ctx)
    first = ctx.infra.LaunchTemplateID["web"]
    templates.ensure_templates(pve, ctx)
    assert ctx.infra.LaunchTemplateID["web"] == first and ctx.infra.outdated_vms() == []
    ctx.spec = make_spec(cores=4)
    templates.ensure_templates(pve, ctx)
    assert ctx.infra.LaunchTemplateVersion["web"] == 2
    assert [v.Name for v in ctx.infra.outdated_vms()] == ["demo-web-0", "demo-web-1"]
    compute.ensure_vms(pve, ctx)  # an apply leaves outdated VMs as they are: `vmplane rotate` replaces them
    assert {str(pve.get(f"nodes/pve1/qemu/{v.ID}/config")["cores"]) for v in ctx.infra.VMs} == {"2"}
    assert len(ctx.infra.outdated_vms()) == 2


def test_killed_after_the_vmid_intent_or_mid_config_ends_with_one_vm_per_record(
    cluster: Serving, pve: Pve, guest: GuestPlayer
) -> None:
    ctx = make_ctx(make_spec(size=2))
    network_ready(pve, ctx)
    templates.ensure_templates(pve, ctx)
    ids = pve_ids(ctx.infra)
    # demo-web-0: the VMID was recorded, then the run died before the clone call.
    ctx.infra.VMs = [VMRecord(Name="demo-web-0", Pool="web", Index=0, ID="150", AZ="pve1")]
    ids.Vmids = {"150": "pve1"}
    # demo-web-1: cloned (in the env's pool) but never configured, nothing recorded.
    pve.run_task(
        "POST", f"nodes/pve1/qemu/{TEMPLATE_VMID}/clone", node="pve1", what="clone",
        newid=151, name="demo-web-1", full=1, pool=ids.Pool,
    )  # fmt: skip
    compute.ensure_vms(pve, ctx)
    by_name = {v.Name: v.ID for v in ctx.infra.VMs}
    assert by_name == {"demo-web-0": "150", "demo-web-1": "151"}
    assert sorted(clones(cluster)) == [150, 151]
    assert all(v.State is VMState.ready for v in ctx.infra.VMs)


def test_a_clone_still_copying_when_the_run_resumes_is_waited_for(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    ctx.spec = make_spec(size=1)
    templates.ensure_templates(pve, ctx)
    pve.run_task(
        "POST", f"nodes/pve1/qemu/{TEMPLATE_VMID}/clone", node="pve1", what="clone",
        newid=180, name="demo-web-0", full=1, pool=pve_ids(ctx.infra).Pool,
    )  # fmt: skip

    def lock(value: str | None) -> None:
        next(vm for vm in cluster.pve.vms if vm.vmid == 180).lock = value

    cluster.run(lock, "clone")  # as a clone task a killed run started would hold it
    timer = threading.Timer(0.3, lambda: cluster.run(lock, None))
    timer.start()
    compute.ensure_vms(pve, ctx)
    timer.join()
    assert [(v.ID, v.State) for v in ctx.infra.VMs] == [("180", VMState.ready)]
    # The same for a destroy: a teardown waits for the lock rather than failing on it.
    cluster.run(lock, "clone")
    timer = threading.Timer(0.3, lambda: cluster.run(lock, None))
    timer.start()
    compute.delete_vms(pve, ctx)
    timer.join()
    assert clones(cluster) == {}


def test_a_destroy_a_killed_run_left_running_is_waited_out(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    ctx.spec = make_spec(size=1)
    apply(pve, ctx)
    vmid = int(str(ctx.infra.VMs[0].ID))

    def destroying() -> None:
        next(vm for vm in cluster.pve.vms if vm.vmid == vmid).lock = "destroyed"

    def gone() -> None:
        cluster.pve.vms[:] = [vm for vm in cluster.pve.vms if vm.vmid != vmid]

    cluster.run(destroying)  # the killed run's destroy task, still removing the disks
    timer = threading.Timer(0.3, lambda: cluster.run(gone))
    timer.start()
    compute.delete_vms(pve, ctx)
    timer.join()
    assert clones(cluster) == {} and ctx.infra.VMs == []


def test_a_clone_whose_answer_was_lost_is_adopted_not_made_twice(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vmplane.clouds.errors import ConflictError
    from vmplane.clouds.proxmox import vms

    real_clone = vms.clone

    def clone_then_lose_the_answer(*args: Any) -> None:
        real_clone(*args)  # the first try made it; its retry was told the VMID's config exists
        raise ConflictError("unable to create VM: config file already exists")

    monkeypatch.setattr(vms, "clone", clone_then_lose_the_answer)
    ctx.spec = make_spec(size=1)
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)
    assert list(clones(cluster)) == [int(str(ctx.infra.VMs[0].ID))]
    assert ctx.infra.VMs[0].State is VMState.ready


def test_a_recorded_vmid_now_holding_another_vm_is_not_adopted(cluster: Serving, pve: Pve, guest: GuestPlayer) -> None:
    ctx = make_ctx(make_spec(size=1))
    network_ready(pve, ctx)
    templates.ensure_templates(pve, ctx)
    pve.run_task(
        "POST", f"nodes/pve1/qemu/{TEMPLATE_VMID}/clone", node="pve1", what="clone", newid=160, name="someone-else",
    )  # fmt: skip
    ctx.infra.VMs = [VMRecord(Name="demo-web-0", Pool="web", Index=0, ID="160", AZ="pve1")]
    compute.ensure_vms(pve, ctx)
    assert ctx.infra.VMs[0].ID != "160"
    assert sorted(clones(cluster)) == sorted([160, int(str(ctx.infra.VMs[0].ID))])
    other = pve.get("nodes/pve1/qemu/160/config")
    assert "tags" not in other and other["name"] == "someone-else"


def test_a_vm_without_its_iso_never_gets_ready_and_the_error_names_it(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "bootstrap_timeout", lambda _ctx: 1.0)
    ctx.spec = make_spec(size=1)
    templates.ensure_templates(pve, ctx)
    # The ISO upload "succeeds" with no bytes: the clone boots with nothing to run.
    from vmplane.clouds.proxmox import vms

    monkeypatch.setattr(vms, "seed_iso", lambda _ctx, _rec, _vmid: b"")
    with pytest.raises(DeadlineExceededError, match="demo-web-0"):
        compute.ensure_vms(pve, ctx)
    assert ctx.infra.VMs[0].State is VMState.failed
    assert guest.booted == {}


def test_a_failed_bootstrap_names_what_its_log_says(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readiness, "bootstrap_timeout", lambda _ctx: 1.0)
    ctx.spec = make_spec(size=1)
    guest.fail_bootstrap(100)  # the first id nextid hands out
    templates.ensure_templates(pve, ctx)
    with pytest.raises(DeadlineExceededError, match="artifact nginx unpinned"):
        compute.ensure_vms(pve, ctx)


def test_delete_destroys_everything_twice_over(cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer) -> None:
    apply(pve, ctx)
    # An unrecorded VM of the job (a crash lost its record): found by its tag token.
    lost = ctx.infra.VMs.pop()
    compute.delete_vms(pve, ctx)
    assert clones(cluster) == {}
    assert pve.get("nodes/pve1/storage/local/content", content="iso") == []
    assert ctx.infra.VMs == [] and pve_ids(ctx.infra).Isos == {}
    assert any(m == "DELETE" and p.endswith(f"/qemu/{lost.ID}") for m, p, _ in writes(cluster))
    volumes = cluster.run(lambda: dict(cluster.pve.storages["local-lvm"].get("volumes", {})))
    assert [n for n, v in volumes.items() if v.get("vmid") != TEMPLATE_VMID] == []  # the clones' disks went too
    assert pve.get(f"pools/{pve_ids(ctx.infra).Pool}").get("members") == []
    compute.delete_vms(pve, ctx)  # nothing left: done, not an error
    assert JOB_ID in ctx.job_id


@pytest.mark.parametrize("shared", [False, True])
def test_clones_spread_over_the_nodes_only_from_shared_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    for key, value in token_env().items():
        monkeypatch.setenv(key, value)
    with serve(tmp_path, nodes=("pve1", "pve2")) as two:
        two.run(lambda: two.pve.storages["local-lvm"].update(shared=1 if shared else 0))
        player = GuestPlayer(two).start()
        try:
            pve = pve_for(two)
            ctx = make_ctx(make_spec(size=2))
            network_ready(pve, ctx)
            apply(pve, ctx)
        finally:
            player.stop()
        placed = {r["name"]: r["node"] for r in cluster_vms(pve) if not r.get("template")}
        assert placed == {"demo-web-0": "pve1", "demo-web-1": "pve2" if shared else "pve1"}
        assert [v.AZ for v in ctx.infra.VMs] == list(placed.values())
        assert any("not on shared storage" in n for n in ctx.notes) is not shared
        assert all(v.State is VMState.ready for v in ctx.infra.VMs)


def test_a_smaller_size_removes_the_highest_numbered_vms_and_their_isos(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    apply(pve, ctx)
    gone = ctx.infra.VMs[1]
    ctx.spec = make_spec(size=1)
    apply(pve, ctx)
    assert [v.Name for v in ctx.infra.VMs] == ["demo-web-0"]
    assert sorted(clones(cluster)) == [int(str(ctx.infra.VMs[0].ID))]
    isos = {c["volid"] for c in pve.get("nodes/pve1/storage/local/content", content="iso")}
    assert isos == {pve_ids(ctx.infra).Isos["demo-web-0"]} and gone.Name not in pve_ids(ctx.infra).Isos


def test_the_runtime_push_goes_through_the_agent(cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer) -> None:
    from vmplane.bootstrap.runtime import render_push_script, runtime_hash
    from vmplane.clouds.proxmox.driver import ProxmoxDriver
    from vmplane.pipeline.runtime_push import push_runtime

    apply(pve, ctx)
    driver = ProxmoxDriver(pve.target)
    assert push_runtime(driver, ctx, sandbox=False) == 2
    assert {v.RuntimeHash for v in ctx.infra.VMs} == {runtime_hash(ctx.spec)}
    script = render_push_script(ctx.spec) + "\n"
    ran = cluster.run(lambda: [list(vm.agent_execs.values()) for vm in cluster.pve.vms if not vm.template])
    assert ran == [[["/bin/bash", "-c", script]]] * 2
    assert push_runtime(driver, ctx, sandbox=False) == 0


def test_teardown_leaves_a_vm_that_took_a_recorded_vmid_alone(cluster: Serving, pve: Pve, ctx: Context) -> None:
    # The job recorded VMID 170 and died before its clone; someone else's VM got 170 since.
    pve.run_task(
        "POST", f"nodes/pve1/qemu/{TEMPLATE_VMID}/clone", node="pve1", what="clone", newid=170, name="someone-else",
    )  # fmt: skip
    ctx.infra.VMs = [VMRecord(Name="demo-web-0", Pool="web", Index=0, ID="170", AZ="pve1")]
    pve_ids(ctx.infra).Vmids = {"170": "pve1"}
    compute.delete_vms(pve, ctx)
    assert sorted(clones(cluster)) == [170]
    assert ctx.infra.VMs == []
