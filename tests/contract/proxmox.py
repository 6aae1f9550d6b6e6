"""Proxmox VE in the driver contract: the tests' fakepve (tests/proxmox/fakecluster.serve), a cluster of its own
per sweep case, its token holding exactly the README's privileges. The crash sweep applies
examples/proxmox.jsonc with one VM (every distinct call is made, and a case costs less); the fake's tasks take
time (a clone 0.3 s): the kill after `POST .../clone` lands while the clone task still runs (the fake holds it
until the resumed run reads the locked VM: fakeqemu.hold, so no race), the kill after `PUT .../resize` with
the resize task running or just done, and the resumed run must not grow the disk twice or leave it ungrown
(the snapshot lists the disk volumes with their sizes). The repair scenario is two VMs on a fake that stores
its SDN objects, drifted through the PVE API with proxmoxer in every way the repair makes a call for.
The hook names calls as `session.call_name` does: `POST /nodes/{node}/qemu/{vmid}/clone`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.contract.adapter import Adapter, RepairEnv
from tests.contract.sweep import differences
from tests.helpers import Cli
from tests.proxmox.drift_kit import NETWORK, Operator, drift_cluster
from tests.proxmox.drift_kit import Env as DriftEnv
from tests.proxmox.fakecluster import TEMPLATE_NAME, Serving, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.privileges_kit import grant_readme_privileges
from tests.proxmox.pve_cli import mutating, pve_cli, write_pve_env
from tests.proxmox.pve_view import cluster_state

from vmplane.clouds.proxmox import naming, ownership
from vmplane.envspec.load import load_spec

POOLS = {"web": {"mode": "fixed", "size": 1, "template": "debian-12-cloud", "cores": 2, "memoryMb": 2048}}
CLONE = "POST /nodes/{node}/qemu/{vmid}/clone"
REPAIR_STEP = "stepRepairDrift"
VOLATILE_KEYS = {"digest", "vmgenid", "smbios1", "pos"}
MAC = re.compile(r"\b[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}\b")


def _norm(value: Any, subs: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, dict):
        return {_norm(k, subs): _norm(v, subs) for k, v in sorted(value.items()) if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return sorted((_norm(v, subs) for v in value), key=lambda x: json.dumps(x, sort_keys=True))
    if isinstance(value, int | str) and not isinstance(value, bool):
        text = str(value)
        for pattern, repl in subs:
            text = pattern.sub(repl, text)
        return text
    return value


def normalised(state: dict[str, Any], env_file: Path, job_id: str) -> dict[str, Any]:
    """The cluster's state with run-specific values replaced: VMIDs (disks, ISOs and members carry them),
    job-derived ids, MACs."""
    spec = load_spec(env_file)
    subs = [(re.compile(rf"\b{vm['vmid']}\b"), f"VMID-{vm['name']}") for vm in state["vms"]]
    for value, name in (
        (naming.pool_id(spec, job_id), "POOL"),
        (naming.security_group(job_id), "GROUP"),
        (naming.zone_id(job_id), "ZONE"),
        (naming.vnet_id(job_id), "VNET"),
        (job_id, "JOB"),
        (job_id.lower(), "job"),
    ):
        subs.append((re.compile(re.escape(value)), name))
    subs.append((MAC, "MAC"))
    return {k: _norm(v, subs) for k, v in state.items()}


def stored_sdn_state(serving: Serving) -> dict[str, Any]:
    """The cluster, with the SDN objects the fake stored (not replayed)."""
    state = cluster_state(serving)
    state["sdn"] = serving.run(
        lambda: {
            kind: {k: {f: v for f, v in o.items() if f != "digest"} for k, o in objects.items()}
            for kind, objects in (
                ("zones", serving.pve.sdn_zones),
                ("vnets", serving.pve.sdn_vnets),
                ("subnets", serving.pve.sdn_subnets),
            )
        }
    )
    return state


@contextmanager
def _cluster(pki: Path) -> Iterator[Serving]:
    pki.mkdir(exist_ok=True)
    with serve(pki) as serving:
        grant_readme_privileges(serving)  # the token holds exactly the README's privileges
        player = GuestPlayer(serving).start()
        try:
            yield serving
        finally:
            player.stop()


def drift_everything(env: DriftEnv, op: Operator) -> None:
    """Every drift the repair has a call for, and a VM deleted (the repair only records that one)."""
    cloud, web0, web1 = env.cloud, env.vm(f"{env.name}-web-0"), env.vm(f"{env.name}-web-1")
    node, vmid, group = web0["AZ"], web0["ID"], cloud["SecurityGroup"]
    stray = op.stray_vm(node, "handmade", env.token())
    op.wait(node, op.qemu(node, stray).status.start.post())  # running: the repair stops it, then destroys it
    op.destroy(web1["AZ"], web1["ID"])
    op.stop(node, vmid)
    op.drop_tag(node, vmid, "team-platform")
    rules = op.qemu(node, vmid).firewall.rules
    rules(next(r["pos"] for r in rules.get() if r["type"] == "group")).delete()
    op.open_ssh_on_vm(node, vmid)
    op.qemu(node, vmid).firewall.options.put(enable=0)
    op.open_ssh_on_group(group)
    op.delete_group_rule(group, "80")
    # A tag dropped from the set the group's and the pool's comments carry (the job id stays: still ours).
    groups = op.px.cluster.firewall.groups
    comment = next(g for g in groups.get() if g["group"] == group)["comment"]
    groups.post(group=group, rename=group, comment=_without_team(comment))
    comment = next(p for p in op.px.pools.get() if p["poolid"] == cloud["Pool"])["comment"]
    op.px.pools(cloud["Pool"]).put(comment=_without_team(comment))
    op.snat_off(cloud["VNet"], cloud["Subnet"])


def _without_team(comment: str) -> str:
    tags = ownership.tags_of_comment(comment)
    assert tags.pop("team") == "platform"
    return ownership.comment(tags)


class ProxmoxAdapter(Adapter):
    name = "pve"
    marks = (pytest.mark.slow,)
    flags = ()  # the fake is a real API to vmplane, not a sandbox target
    APPLY_OPS = [
        "POST /cluster/firewall/groups",
        "POST /cluster/firewall/groups/{group}",
        "POST /cluster/sdn/vnets",
        "POST /cluster/sdn/vnets/{vnet}/subnets",
        "POST /cluster/sdn/zones",
        "POST /nodes/{node}/qemu/{vmid}/agent/exec",
        "POST /nodes/{node}/qemu/{vmid}/clone",
        "POST /nodes/{node}/qemu/{vmid}/config",
        "POST /nodes/{node}/qemu/{vmid}/firewall/rules",
        "POST /nodes/{node}/qemu/{vmid}/status/start",
        "POST /nodes/{node}/storage/{storage}/upload",
        "POST /pools",
        "PUT /cluster/sdn",
        "PUT /nodes/{node}/qemu/{vmid}/firewall/options",
        "PUT /nodes/{node}/qemu/{vmid}/resize",
    ]
    DESTROY_OPS = [
        "DELETE /cluster/firewall/groups/{group}",
        "DELETE /cluster/firewall/groups/{group}/{n}",
        "DELETE /cluster/sdn/vnets/{vnet}",
        "DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
        "DELETE /cluster/sdn/zones/{zone}",
        "DELETE /nodes/{node}/qemu/{vmid}",
        "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
        "DELETE /pools/{pool}",
        "POST /nodes/{node}/qemu/{vmid}/status/stop",
        "PUT /cluster/sdn",
    ]
    REPAIR_OPS = {
        "all": [
            "DELETE /cluster/firewall/groups/{group}/{n}",
            "DELETE /nodes/{node}/qemu/{vmid}",
            "DELETE /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
            "POST /cluster/firewall/groups",
            "POST /cluster/firewall/groups/{group}",
            "POST /nodes/{node}/qemu/{vmid}/firewall/rules",
            "POST /nodes/{node}/qemu/{vmid}/status/start",
            "POST /nodes/{node}/qemu/{vmid}/status/stop",
            "PUT /cluster/sdn",
            "PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
            "PUT /nodes/{node}/qemu/{vmid}/config",
            "PUT /nodes/{node}/qemu/{vmid}/firewall/options",
            "PUT /pools/{pool}",
        ],
    }

    def case(self, op: str) -> str | None:
        return None if op.startswith("GET ") else op

    def sweep_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return _cluster(tmp / "pki")

    def cli(self, tmp: Path, emu: Any) -> Cli:
        return pve_cli(tmp)

    def sweep_name(self, unique: str) -> str:
        return "pvs"  # a cluster of its own per run: one name, so the snapshots compare without renaming

    def write_env(self, tmp: Path, name: str, emu: Any) -> Path:
        return write_pve_env(tmp, emu, name, pools=POOLS)

    def snapshot(self, emu: Any, env_file: Path, job_id: str) -> dict[str, Any]:
        """The whole cluster (its only tenant is this case's job), normalised."""
        return normalised(cluster_state(emu), env_file, job_id)

    def remaining(self, snap: dict[str, Any]) -> dict[str, Any]:
        left = {k: v for k, v in snap.items() if k != "sdn" and v}
        left.update({f"sdn.{k}": v for k, v in snap["sdn"].items() if v})
        return left

    def writes_seen(self, emu: Any) -> list[str] | None:
        return [f"{method} {path}" for method, path in mutating(emu)]

    def check_reference(self, snap: dict[str, Any]) -> None:
        # What every case must reach: one of each, so an empty cluster can never pass for converged.
        assert [len(snap[k]) for k in ("vms", "pools", "groups", "isos", "volumes")] == [1, 1, 1, 1, 1], snap
        assert snap["volumes"][0]["size"] == str(20 * 1024**3), snap["volumes"]  # grown to the example's diskGb
        assert [len(snap["sdn"][k]) for k in ("zones", "vnets", "subnets")] == [1, 1, 1], snap["sdn"]

    @contextmanager
    def around_kill(self, emu: Any, apply_op: str | None) -> Iterator[None]:
        during_clone = apply_op == CLONE
        if during_clone:  # the clone task runs until the resumed run looks at the VM: killed while it runs
            emu.run(emu.pve.hold, "qmclone")
        yield
        if during_clone:
            assert emu.run(lambda: list(emu.pve.met_running)), "the resumed apply never met the running clone"

    @contextmanager
    def _drift_cluster(self, tmp: Path) -> Iterator[Serving]:
        with drift_cluster(tmp / "pki") as (serving, _):
            yield serving

    def repair_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return self._drift_cluster(tmp)

    def repair_env(self, scenario: str, emu: Any, tmp: Path, name: str) -> RepairEnv:
        cli = pve_cli(tmp)
        pools = {"web": {"mode": "fixed", "size": 2, "template": TEMPLATE_NAME}}
        env_file = write_pve_env(tmp, emu, name, network=NETWORK, pools=pools)
        job = cli.json("apply", "-f", str(env_file), "--yes", timeout=300)
        assert job["status"] == "succeeded", job["error"]
        env = RepairEnv(cli, env_file, name, str(job["id"]), emu)
        env.baseline = normalised(stored_sdn_state(emu), env_file, env.job_id)  # the cluster a repair must restore
        return env

    def make_drift(self, scenario: str, env: RepairEnv) -> None:
        record = env.cli.json("status", env.name)
        drift_everything(DriftEnv(env.emu, env.cli, env.env_file, env.name, record), Operator(env.emu))

    def check_repaired(self, scenario: str, env: RepairEnv) -> None:
        got = normalised(stored_sdn_state(env.emu), env.env_file, env.job_id)
        assert got == env.baseline, "\n".join(differences(got, env.baseline)[:40])

    def repair_ops(self, job: dict[str, Any]) -> list[str]:
        step = next(s for s in job["config"]["operation"]["steps"] if s["name"] == REPAIR_STEP)
        return sorted(op for op in step["apiCalls"] if not op.startswith("GET "))
