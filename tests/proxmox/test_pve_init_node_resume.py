"""`vmplane proxmox init-node --apply` after a crash: a VM a killed run left is finished, a run killed with
SIGKILL right after a call is finished by the next, a download still running is waited for, and the access
and zone steps converge on a cluster that keeps them (`StoredAccess`: fakepve stores none of them)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.proxmox.fakecluster import Serving
from tests.proxmox.init_node_kit import IMAGE, SHA, Ran, init_writes

from vmplane.clouds.errors import ConflictError
from vmplane.clouds.faults import FAULT_MARKER, FAULT_PAUSE_ENV
from vmplane.clouds.proxmox import node_init
from vmplane.clouds.proxmox.node_init_script import InitOptions, parse_checksum
from vmplane.clouds.proxmox.privileges import PRIVILEGES
from vmplane.clouds.proxmox.session import Pve, PveTarget, token_from_env
from vmplane.clouds.waits import poll


def test_a_vm_left_by_a_killed_run_is_finished_and_a_foreign_one_refused(
    vmplane_main: Callable[..., Ran], cluster: Serving
) -> None:
    cluster.run(lambda: cluster.pve.storages["local"].update(content="iso,vztmpl,backup,import"))
    cluster.run(lambda: cluster.pve.add_vm(9002, "debian-12-cloud", node="pve1", config={"agent": "0"}))
    pve = Pve(PveTarget(cluster.pve.url, ("pve1",), ca_file=cluster.cafile), token_from_env())
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None, vmid=9002, name="debian-12-cloud")
    done = node_init.apply(pve, o, parse_checksum(f"sha512:{SHA}"))
    assert [(x.key, x.status) for x in done.outcomes][:4] == [
        ("storage", "skipped"),
        ("image", "skipped"),
        ("vm", "skipped"),
        ("template", "created"),
    ]
    vm = cluster.run(lambda: cluster.pve.vm(9002))
    assert vm.template and vm.config["agent"] == "enabled=1"
    with pytest.raises(ConflictError, match="VMID 9000 is taken by 'debian-12-cloud'"):
        node_init.apply(
            pve,
            InitOptions("pve1", f"https://example.org/{IMAGE}", None, name="other"),
            parse_checksum(f"sha512:{SHA}"),
        )


class StoredAccess:
    """A Pve whose SDN zones and access objects are kept, as real PVE keeps them (the fake does not):
    what a re-run of the access steps does against a cluster that remembers."""

    def __init__(self) -> None:
        self.roles: dict[str, str] = {}
        self.users: set[str] = set()
        self.acl: list[dict[str, str]] = []
        self.tokens: set[str] = set()
        self.zones: list[dict[str, str]] = [{"zone": "fake", "type": "simple"}]  # junk: another id
        self.writes: list[tuple[str, str]] = []

    def get(self, path: str, /, **params: Any) -> Any:
        return {
            "access/roles": [{"roleid": r, "privs": p} for r, p in self.roles.items()],
            "access/users": [{"userid": u} for u in self.users],
            "access/acl": self.acl,
            "access/users/vmplane@pve/token": [{"tokenid": t} for t in self.tokens],
            "cluster/sdn/zones": self.zones,
        }[path]

    def post(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("POST", path))
        if path == "access/roles":
            self.roles[p["roleid"]] = p["privs"]
        elif path == "access/users":
            self.users.add(p["userid"])
        elif path == "cluster/sdn/zones":
            self.zones.append({"zone": p["zone"], "type": p["type"]})
        elif path.startswith("access/users/vmplane@pve/token/"):
            self.tokens.add(path.rsplit("/", 1)[1])
            return {"value": "s3cret-new"}
        return None

    def put(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("PUT", path))
        if path == "access/acl":
            self.acl.append({"path": p["path"], "roleid": p["roles"], "ugid": p["users"], "type": "user"})
        elif path.startswith("access/roles/"):
            self.roles[path.rsplit("/", 1)[1]] = p["privs"]
        return None

    def delete(self, path: str, /, **p: Any) -> Any:
        self.writes.append(("DELETE", path))
        self.tokens.discard(path.rsplit("/", 1)[1])


def test_access_and_zone_steps_converge_on_a_cluster_that_keeps_them(
    vmplane_main: Callable[..., Ran],
) -> None:
    store = StoredAccess()
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None)
    first = node_init.Applied()
    node_init._ensure_zone(store, o, first)  # type: ignore[arg-type]
    node_init._ensure_access(store, o, first)  # type: ignore[arg-type]
    assert first.token_secret == "s3cret-new"
    assert ("POST", "cluster/sdn/zones") in store.writes  # the junk zone `fake` was not taken for ours
    store.roles["VmplaneProvisioner"] += ",Sys.Console"  # someone widened the role by hand
    store.zones[-1]["state"] = ""
    store.writes.clear()
    second = node_init.Applied()
    node_init._ensure_zone(store, o, second)  # type: ignore[arg-type]
    node_init._ensure_access(store, o, second)  # type: ignore[arg-type]
    assert store.writes == [("PUT", "access/roles/VmplaneProvisioner")]
    assert set(store.roles["VmplaneProvisioner"].split(",")) == set(PRIVILEGES)
    assert second.token_secret is None and "--rotate-token" in second.outcomes[-1].detail
    store.writes.clear()
    rotated = node_init.Applied()
    node_init._ensure_access(store, InitOptions("pve1", o.image_url, None, rotate_token=True), rotated)  # type: ignore[arg-type]
    assert store.writes[-2:] == [
        ("DELETE", "access/users/vmplane@pve/token/vmplane"),
        ("POST", "access/users/vmplane@pve/token/vmplane"),
    ]
    assert rotated.token_secret == "s3cret-new"


@pytest.mark.parametrize("kill_after", ["POST /nodes/{node}/storage/{storage}/download-url", "POST /nodes/{node}/qemu"])
def test_a_run_killed_after_a_call_is_finished_by_the_next(
    kill_after: str, vmplane_main: Callable[..., Ran], cluster: Serving, tmp_path: Path
) -> None:
    """kill -9 right after the call returned (the task it started runs on), then a re-run: the state of
    one clean run, nothing made twice."""
    args = ["proxmox", "init-node", "--endpoint", cluster.pve.url, "--ca-file", cluster.cafile, "--node", "pve1"]
    args += ["--image-url", f"https://example.org/{IMAGE}", "--checksum", f"sha512:{SHA}", "--vmid", "9003"]
    args += ["--name", "debian-12-cloud", "--no-bake-agent", "--apply", "--yes"]
    env = dict(os.environ, VMPLANE_HOME=str(tmp_path), **{FAULT_PAUSE_ENV: kill_after})
    marker = tmp_path / FAULT_MARKER
    proc = subprocess.Popen([sys.executable, "-m", "vmplane", *args], env=env, stdout=subprocess.DEVNULL)
    try:
        poll(lambda: marker.exists() or None, what="the fault marker", timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert vmplane_main(args).exit_code == 0
    vm = cluster.run(lambda: cluster.pve.vm(9003))
    assert vm.template and vm.config["agent"] == "enabled=1"
    made = [p for m, p, _ in init_writes(cluster) if p in ("nodes/pve1/qemu", "nodes/pve1/storage/local/download-url")]
    assert sorted(made) == ["nodes/pve1/qemu", "nodes/pve1/storage/local/download-url"]
    create = next(b for _, p, b in init_writes(cluster) if p == "nodes/pve1/qemu")  # --no-bake-agent: the image as is
    assert create["scsi0"] == [f"local-lvm:0,import-from=local:import/debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"]
    files = cluster.run(lambda: [v for v in cluster.pve.storages["local"]["volumes"] if v.startswith("import/")])
    assert files == [f"import/debian-12-genericcloud-amd64-{SHA[:12]}.qcow2"]


def test_a_download_still_running_from_a_killed_run_is_waited_for_not_repeated(cluster: Serving) -> None:
    cluster.run(lambda: cluster.pve.storages["local"].update(content="iso,vztmpl,backup,import"))
    pve = Pve(PveTarget(cluster.pve.url, ("pve1",), ca_file=cluster.cafile), token_from_env())
    o = InitOptions("pve1", f"https://example.org/{IMAGE}", None, vmid=9004, name="debian-12-cloud")
    checksum = parse_checksum(f"sha512:{SHA}")
    cluster.pve.time_scale = 0.05  # the earlier run's download takes a moment (5 PVE seconds)
    upid = pve.post(
        "nodes/pve1/storage/local/download-url",
        content="import",
        url=o.image_url,
        filename=o.import_file(checksum),
        checksum=SHA,
        **{"checksum-algorithm": "sha512"},
    )
    assert cluster.run(lambda: cluster.pve.tasks[upid].get("endtime")) is None  # still running (asleep)
    cluster.pve.time_scale = 0
    done = node_init.apply(pve, o, checksum)
    assert ("image", "skipped") in [(x.key, x.status) for x in done.outcomes]
    assert [p for _, p, _ in init_writes(cluster)].count("nodes/pve1/storage/local/download-url") == 1
