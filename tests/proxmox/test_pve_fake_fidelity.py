"""fakepve as the Proxmox tests serve it (fakecluster.serve: fakeqemu.py and fakesdn.py on top) answers
closer to PVE than fakepve alone. Each test states what plain fakepve (`serve(sdn=False, timed=False)`
before this layer) answered; the messages are PVE's, from fakepve's error catalogue (the source lines of
qemu-server's resize_vm, pve-guest-common's check_lock)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proxmoxer.core import ResourceException
from tests.proxmox.fakecluster import TEMPLATE_VMID, TOKEN_USER, Serving, serve
from tests.proxmox.privileges_kit import grant_readme_privileges
from tests.proxmox.pve_view import client

NODE = "pve1"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Serving]:
    with serve(tmp_path) as serving:
        yield serving


def wait(px: Any, upid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status: dict[str, Any] = px.nodes(NODE).tasks(upid).status.get()
        if status["status"] == "stopped":
            return status
        time.sleep(0.02)
    raise AssertionError(f"task {upid} still running")


def clone(px: Any, newid: int) -> str:
    upid: str = px.nodes(NODE).qemu(TEMPLATE_VMID).clone.post(newid=newid, name=f"c{newid}", full=1)
    return upid


def disk_volumes(px: Any) -> list[str]:
    return sorted(c["volid"] for c in px.nodes(NODE).storage("local-lvm").content.get(content="images"))


def test_a_clone_runs_as_a_task_that_takes_time_and_locks_the_new_vm(fake: Serving) -> None:
    """Plain fakepve ended the clone before answering its UPID: the task was never seen `running`, the new
    VM never locked, and a config change right after the clone's answer succeeded."""
    px = client(fake)
    upid = clone(px, 120)
    running = px.nodes(NODE).tasks(upid).status.get()
    assert running["status"] == "running", running
    assert px.nodes(NODE).qemu(120).status.current.get()["lock"] == "clone"
    with pytest.raises(ResourceException, match=r"VM is locked \(clone\)"):
        px.nodes(NODE).qemu(120).config.put(cores=2)
    done = wait(px, upid)
    assert done["exitstatus"] == "OK", done
    assert "lock" not in px.nodes(NODE).qemu(120).status.current.get()
    px.nodes(NODE).qemu(120).config.put(cores=2)  # unlocked: accepted


def test_a_start_is_running_before_the_vm_is(fake: Serving) -> None:
    """Plain fakepve ran a start to its end before the answer: the VM was `running` at once."""
    px = client(fake)
    wait(px, clone(px, 121))
    upid = px.nodes(NODE).qemu(121).status.start.post()
    assert px.nodes(NODE).qemu(121).status.current.get()["status"] == "stopped"
    assert wait(px, upid)["exitstatus"] == "OK"
    assert px.nodes(NODE).qemu(121).status.current.get()["status"] == "running"


def test_resize_grows_the_disk_in_the_config_and_on_the_storage(fake: Serving) -> None:
    """Plain fakepve answered a resize with a task that changed nothing: the config kept `size=3G`."""
    px = client(fake)
    wait(px, clone(px, 122))
    q = px.nodes(NODE).qemu(122)
    assert wait(px, q.resize.put(disk="scsi0", size="10G"))["exitstatus"] == "OK"
    assert "size=10G" in q.config.get()["scsi0"]
    assert wait(px, q.resize.put(disk="scsi0", size="+2G"))["exitstatus"] == "OK"
    assert "size=12G" in q.config.get()["scsi0"]
    sizes = {c["volid"]: c["size"] for c in px.nodes(NODE).storage("local-lvm").content.get(content="images")}
    assert sizes["local-lvm:vm-122-disk-0"] == 12 * 1024**3


@pytest.mark.parametrize(
    ("disk", "size", "message"),
    [
        ("scsi0", "2G", "shrinking disks is not supported"),  # Qemu.pm:6079
        ("scsi5", "20G", "disk 'scsi5' does not exist"),  # Qemu.pm:6041
    ],
)
def test_resize_refuses_what_pve_refuses(fake: Serving, disk: str, size: str, message: str) -> None:
    """Plain fakepve accepted a shrink and a resize of a drive the VM does not have (a task, then nothing)."""
    px = client(fake)
    wait(px, clone(px, 123))
    with pytest.raises(ResourceException, match=message):
        px.nodes(NODE).qemu(123).resize.put(disk=disk, size=size)
    assert "size=3G" in px.nodes(NODE).qemu(123).config.get()["scsi0"]


def test_resize_of_a_cdrom_is_refused(fake: Serving) -> None:
    """Plain fakepve accepted it. PVE: `you can't resize a cdrom` (Qemu.pm:6052)."""
    px = client(fake)
    wait(px, clone(px, 124))
    px.nodes(NODE).qemu(124).config.put(ide3="none,media=cdrom")
    with pytest.raises(ResourceException, match="you can't resize a cdrom"):
        px.nodes(NODE).qemu(124).resize.put(disk="ide3", size="+1G")


def test_a_clone_makes_a_disk_volume_and_a_destroy_removes_it(fake: Serving) -> None:
    px = client(fake)
    before = disk_volumes(px)
    wait(px, clone(px, 125))
    assert disk_volumes(px) == sorted([*before, "local-lvm:vm-125-disk-0"])
    wait(px, px.nodes(NODE).qemu(125).delete(purge=1))
    assert disk_volumes(px) == before


def test_sdn_objects_are_stored_by_default(fake: Serving) -> None:
    """Plain fakepve (and `serve(sdn=False)`) listed made-up SDN objects and kept none it was sent."""
    px = client(fake)
    assert px.cluster.sdn.zones.get() == []
    px.cluster.sdn.zones.post(zone="vz1", type="simple")
    assert [z["zone"] for z in px.cluster.sdn.zones.get()] == ["vz1"]


def test_a_held_clone_runs_until_a_client_reads_its_vm(fake: Serving) -> None:
    """The crash sweep's way to kill during a clone whatever the machine's speed (fakeqemu.hold)."""
    px = client(fake)
    fake.run(fake.pve.hold, "qmclone")
    upid = clone(px, 126)
    time.sleep(1)  # three times the clone's own duration: still running, as it waits for a reader
    assert px.nodes(NODE).tasks(upid).status.get()["status"] == "running"
    assert px.nodes(NODE).qemu(126).status.current.get()["lock"] == "clone"  # this read lets it go
    assert wait(px, upid)["exitstatus"] == "OK"
    assert fake.run(lambda: list(fake.pve.met_running)) == [126]


@pytest.mark.parametrize("vnet", [False, True])
def test_a_nic_needs_sdn_use_on_its_bridge_or_vnet(fake: Serving, vnet: bool) -> None:
    """Plain fakepve checked only VM.Config.Network for a qemu NIC: without SDN.Use the change went through.
    PVE: `Permission check failed (/sdn/zones/<zone>/<bridge>, SDN.Use)`, the zone `localnetwork` for a
    plain Linux bridge (pve-guest-common, GuestHelpers.pm check_vnet_access)."""
    px = client(fake)
    wait(px, clone(px, 127))
    bridge, zone = ("vn1", "vz1") if vnet else ("vmbr0", "localnetwork")
    if vnet:
        px.cluster.sdn.zones.post(zone="vz1", type="simple")
        px.cluster.sdn.vnets.post(vnet="vn1", zone="vz1")
    grant_readme_privileges(fake, without=["SDN.Use"])
    with pytest.raises(ResourceException, match=re.escape(f"({'/sdn/zones/' + zone + '/' + bridge}, SDN.Use)")):
        px.nodes(NODE).qemu(127).config.put(net0=f"virtio,bridge={bridge}")
    fake.run(fake.pve.grant, TOKEN_USER, f"/sdn/zones/{zone}", "SDN.Use")
    px.nodes(NODE).qemu(127).config.put(net0=f"virtio,bridge={bridge}")  # held on the zone: accepted
