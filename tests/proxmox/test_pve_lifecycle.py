"""Issue 15's acceptance through the real CLI: examples/proxmox.jsonc applied against fakepve to
`succeeded` with the 7 steps, the cluster read back with proxmoxer (full clones in the env's pool, started,
tagged, behind the firewall, the SDN subnet with SNAT as requested), readiness and `vmplane exec` through
the guest agent, and a destroy after which nothing of the job is left; the token holds exactly the
privileges the README lists (tests/proxmox/privileges_kit.py). No output or record holds the
token's secret. Also: the starter `vmplane init --cloud proxmox` writes is the example's shape."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import EXAMPLES, Cli, free_port
from tests.integration.test_apply_destroy import PROVISION, TEARDOWN
from tests.proxmox.fakecluster import TEMPLATE_VMID, TOKEN_SECRET, Serving, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.privileges_kit import grant_readme_privileges
from tests.proxmox.pve_cli import pve_cli, write_pve_env
from tests.proxmox.pve_view import cluster_state, requests

from vmplane.bootstrap.runtime import render_push_script
from vmplane.clouds.tags import proxmox_tags
from vmplane.envspec.load import load_spec


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    with serve(tmp_path) as serving:
        grant_readme_privileges(serving)  # the token holds exactly what the README lists, as a site's would
        player = GuestPlayer(serving).start()
        try:
            yield serving, player
        finally:
            player.stop()


def _agent_execs(serving: Serving, vmid: int) -> list[list[str]]:
    """The argv of every agent/exec the VM was asked to run."""
    return serving.run(lambda: [list(a) for vm in serving.pve.vms if vm.vmid == vmid for a in vm.agent_execs.values()])


def _secret_free(*texts: str) -> None:
    for text in texts:
        assert TOKEN_SECRET not in text


def _home_secret_free(home: Path) -> None:
    """Nothing vmplane wrote (its databases, logs, caches) holds the token's secret."""
    for path in home.rglob("*"):
        if path.is_file():
            assert TOKEN_SECRET.encode() not in path.read_bytes(), path


def _assert_shape(state: dict[str, Any], job: dict[str, Any]) -> None:
    """The production shape of the environment, read from the cluster."""
    infra, job_id = job["config"]["infra"], job["id"]
    cloud = infra["Cloud"]
    pool, group, bridge = cloud["Pool"], cloud["SecurityGroup"], infra["NetworkID"]
    cidr = cloud["SubnetCidr"]
    assert cidr == "10.60.0.0/24"
    vms = {v["name"]: v for v in state["vms"]}
    assert sorted(vms) == ["pvl-web-0", "pvl-web-1"]
    token = proxmox_tags({"zop:jobId": job_id})[0]
    for name, vm in vms.items():
        config = vm["config"]
        assert vm["status"] == "running" and vm["pool"] == pool, name
        assert vm["vmid"] != TEMPLATE_VMID
        # A full clone: its own disk, not a linked one on the template's base volume.
        disk = config["scsi0"]
        assert disk.startswith(f"local-lvm:vm-{vm['vmid']}-disk-") and "base-" not in disk, disk
        assert (int(config["cores"]), int(config["memory"])) == (2, 2048)
        assert "enabled=1" in config["agent"] or config["agent"].startswith("1"), config["agent"]
        net0 = dict(p.split("=", 1) for p in config["net0"].split(",") if "=" in p)
        assert net0["bridge"] == bridge and net0["firewall"] == "1", config["net0"]
        assert config["ide3"].split(",")[0] == cloud["Isos"][name] and "media=cdrom" in config["ide3"]
        tags = config["tags"].split(";")
        assert token in tags and "zop_managed_by-vmplane" in tags, tags
        assert f"zop:jobId={job_id}" in config["description"], config["description"]
        options = vm["firewall"]["options"]
        assert (options["enable"], options["policy_in"]) == (1, "DROP")
        assert [(r["type"], r["action"]) for r in vm["firewall"]["rules"]] == [("group", group)]
    assert set(state["pools"]) == {pool}
    assert sorted(m["name"] for m in state["pools"][pool]["members"]) == sorted(vms)
    # The group lets in the ingressPorts over TCP from the subnet only; nothing on 22.
    rules = state["groups"][group]["rules"]
    assert {(r["type"], r["action"], r["proto"], r["dport"], r.get("source")) for r in rules} == {
        ("in", "ACCEPT", "tcp", "80", cidr)
    }
    assert set(state["isos"]) == set(cloud["Isos"].values())
    # SDN, as requested (read back from what the fake stored: fakesdn.py).
    sdn = state["sdn"]
    assert {z: f["type"] for z, f in sdn["zones"].items()} == {cloud["Zone"]: "simple"}
    assert {v: f["zone"] for v, f in sdn["vnets"].items()} == {bridge: cloud["Zone"]}
    (subnet,) = sdn["subnets"].values()
    assert subnet["subnet"] == cidr and subnet["snat"] == "1" and subnet.get("dhcp-range")
    assert ipaddress.ip_address(subnet["gateway"]) in ipaddress.ip_network(cidr)


@pytest.mark.slow
def test_the_example_applies_runs_exec_and_destroys_to_nothing(
    fake: tuple[Serving, GuestPlayer], tmp_path: Path
) -> None:
    serving, player = fake
    cli = pve_cli(tmp_path)
    env_file = write_pve_env(tmp_path, serving, "pvl", network={"cidr": "10.60.0.0/24", "ingressPorts": [80]})
    proc = cli.run("apply", "-f", str(env_file), "--yes", "--output", "json")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    job = json.loads(proc.stdout)
    assert job["status"] == "succeeded", job["error"]
    assert [s["name"] for s in job["steps"]] == PROVISION
    _secret_free(proc.stdout, proc.stderr)
    _assert_shape(cluster_state(serving), job)
    infra = job["config"]["infra"]
    assert {v["Name"]: v["State"] for v in infra["VMs"]} == {"pvl-web-0": "ready", "pvl-web-1": "ready"}
    # Ready because the guest booted from vmplane's ISO (the player plays only those), said by the agent.
    assert sorted(player.booted) == sorted(int(v["ID"]) for v in infra["VMs"])
    log = "\n".join(line for s in job["steps"] for line in s.get("log", []))
    assert "sentinel read through the QEMU guest agent" in log, log
    assert "simulated guest" in log  # and it says no VM booted: the player wrote that sentinel
    sent = [(m, p, f) for m, p, f in requests(serving) if m != "GET"]
    assert ("PUT", "cluster/sdn") in [(m, p) for m, p, _ in sent]  # the SDN change applied
    clones = [f for m, p, f in sent if p == f"nodes/pve1/qemu/{TEMPLATE_VMID}/clone"]
    assert len(clones) == 2 and all(c["full"] == "1" and c["pool"] == infra["Cloud"]["Pool"] for c in clones)
    # The runtime settings reached each VM through agent/exec (the pipeline's runtime push): its script.
    assert "pushed to 2 VMs through the exec channel" in log, log
    push = render_push_script(load_spec(env_file))
    assert "/etc/vmplane/runtime.env" in push
    for vm in infra["VMs"]:
        assert push.strip() in [argv[-1].strip() for argv in _agent_execs(serving, int(vm["ID"]))], vm["Name"]
    # Each disk grown to diskGb, once: in the config and on the storage (tests/proxmox/fakeqemu.py).
    state = cluster_state(serving)
    sizes = {v["volid"]: v["size"] for v in state["volumes"]}
    for vm in infra["VMs"]:
        resize = f"nodes/{vm['AZ']}/qemu/{vm['ID']}/resize"
        assert [f for m, p, f in sent if p == resize] == [{"disk": "scsi0", "size": "20G"}], vm["Name"]
        disk = next(v["config"]["scsi0"] for v in state["vms"] if v["name"] == vm["Name"])
        assert "size=20G" in disk and sizes[disk.split(",")[0]] == 20 * 1024**3, disk

    # exec through the guest agent: the command reaches agent/exec of that VM, its answer comes back.
    ran = cli.run("exec", "-o", "json", "pvl", "pvl-web-0", "--", "uname", "-a")
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["exitCode"] == 0
    vmid = next(int(v["ID"]) for v in infra["VMs"] if v["Name"] == "pvl-web-0")
    argvs = _agent_execs(serving, vmid)
    assert any("uname -a" in " ".join(argv) for argv in argvs), argvs

    # No interactive session through the API: the refusal says what to use instead.
    shell = cli.run("exec", "pvl", "pvl-web-0", "--interactive")
    assert shell.returncode == 1 and "qm terminal" in shell.stderr and "vmplane exec" in shell.stderr, shell.stderr

    status = cli.run("status", "pvl", "-o", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "succeeded"
    _secret_free(ran.stdout, ran.stderr, status.stdout, status.stderr)

    gone = cli.run("destroy", "-f", str(env_file), "--yes", "--output", "json")
    assert gone.returncode == 0, f"exit {gone.returncode}\n{gone.stdout}\n{gone.stderr}"
    done = json.loads(gone.stdout)
    assert done["status"] == "deleted", done["error"]
    assert [s["name"] for s in done["teardownSteps"]] == TEARDOWN
    unregister = next(s for s in done["teardownSteps"] if s["name"] == "stepUnregisterSpace")
    assert "nothing tagged with this job remains" in "\n".join(unregister["log"])  # the driver's leftover scan
    _secret_free(gone.stdout, gone.stderr)
    left = cluster_state(serving)
    assert left["vms"] == [] and left["pools"] == {} and left["groups"] == {} and left["isos"] == []
    assert left["volumes"] == []  # the clones' disks went with them
    assert left["sdn"] == {"zones": {}, "vnets": {}, "subnets": {}}
    deletes = {p for m, p, _ in requests(serving) if m == "DELETE"}
    cloud = infra["Cloud"]
    assert {f"cluster/sdn/zones/{cloud['Zone']}", f"cluster/sdn/vnets/{infra['NetworkID']}"} <= deletes
    assert serving.run(lambda: [vm.vmid for vm in serving.pve.vms]) == [TEMPLATE_VMID]  # the template stays
    _home_secret_free(cli.home)


def test_the_starter_is_the_example_shape(tmp_path: Path) -> None:
    cli = Cli(home=tmp_path / "home", sandbox_port=free_port())
    target = tmp_path / "vmplane.env.jsonc"
    proc = cli.run("init", "--cloud", "proxmox", "--name", "shop", "-f", str(target))
    assert proc.returncode == 0, proc.stderr
    assert cli.run("validate", "-f", str(target)).returncode == 0
    starter, example = load_spec(target), load_spec(EXAMPLES / "proxmox.jsonc")
    assert starter.provider == example.provider
    assert starter.pools["web"].model_dump(exclude={"size"}) == example.pools["web"].model_dump(exclude={"size"})
    assert starter.exec_ == example.exec_
