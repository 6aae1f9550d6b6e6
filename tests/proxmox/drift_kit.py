"""What the Proxmox drift tests share: a fake cluster that stores its SDN objects (fakesdn.py) with the
guest player on it, examples/proxmox.jsonc applied to it through the CLI, `vmplane drift -o json`, and the
out-of-band changes an operator makes, through the PVE API with proxmoxer (pve_view.client), never
through vmplane's own session."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.proxmox.fakecluster import Serving, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.pve_cli import PveCli, pve_cli, write_pve_env
from tests.proxmox.pve_view import client

from vmplane.clouds.proxmox import naming
from vmplane.clouds.tags import proxmox_tags

T = "proxmox_virtual_environment_"
NETWORK = {"cidr": "10.60.0.0/24", "ingressPorts": [80]}


@contextmanager
def drift_cluster(pki: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    pki.mkdir(exist_ok=True)
    with serve(pki, sdn=True) as serving:
        player = GuestPlayer(serving).start()
        try:
            yield serving, player
        finally:
            player.stop()


@dataclass
class Env:
    """One applied environment: its CLI, file, job and the ids its record holds."""

    serving: Serving
    cli: PveCli
    file: Path
    name: str
    job: dict[str, Any]

    @property
    def infra(self) -> dict[str, Any]:
        return dict(self.job["config"]["infra"])

    @property
    def cloud(self) -> dict[str, Any]:
        return dict(self.infra["Cloud"])

    def vm(self, name: str) -> dict[str, Any]:
        return next(v for v in self.infra["VMs"] if v["Name"] == name)

    def token(self) -> str:
        return proxmox_tags({"zop:jobId": self.job["id"]})[0]

    def drift(self) -> tuple[int, dict[str, Any]]:
        proc = self.cli.run("drift", self.name, "-o", "json")
        assert proc.returncode in (0, 3), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc.returncode, json.loads(proc.stdout)

    def apply(self) -> str:
        """`vmplane apply --yes` (text: the plan's repair lines are in it); the job must succeed."""
        proc = self.cli.run("apply", "-f", str(self.file), "--yes", timeout=300)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        self.job = self.cli.json("status", self.name)
        assert self.job["status"] == "succeeded", self.job["error"]
        return proc.stdout + proc.stderr


def apply_env(serving: Serving, tmp_path: Path, name: str, **overrides: Any) -> Env:
    cli = pve_cli(tmp_path)
    env_file = write_pve_env(tmp_path, serving, name, network=NETWORK, **overrides)
    job = cli.json("apply", "-f", str(env_file), "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    return Env(serving, cli, env_file, name, job)


def by_resource(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["resource"]: d for d in report["drift"]}


def fields(entry: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["field"]: (f["wanted"], f["actual"]) for f in entry["fields"]}


# ---- out of band, through the PVE API ---------------------------------------------------------------


class Operator:
    """Someone at the cluster with proxmoxer: each change waits for its task, as `qm` does."""

    def __init__(self, serving: Serving) -> None:
        self.px = client(serving)

    def wait(self, node: str, upid: Any) -> None:
        if not (isinstance(upid, str) and upid.startswith("UPID:")):
            return
        while self.px.nodes(node).tasks(upid).status.get()["status"] != "stopped":
            time.sleep(0.02)

    def qemu(self, node: str, vmid: int | str) -> Any:
        return self.px.nodes(node).qemu(vmid)

    def stop(self, node: str, vmid: int | str) -> None:
        self.wait(node, self.qemu(node, vmid).status.stop.post())

    def destroy(self, node: str, vmid: int | str) -> None:
        self.stop(node, vmid)
        self.wait(node, self.qemu(node, vmid).delete(purge=1))

    def drop_tag(self, node: str, vmid: int | str, token: str) -> None:
        tags = [t for t in str(self.qemu(node, vmid).config.get().get("tags", "")).split(";") if t and t != token]
        self.qemu(node, vmid).config.put(tags=";".join(tags))

    def open_ssh_on_vm(self, node: str, vmid: int | str) -> None:
        self.qemu(node, vmid).firewall.rules.post(
            type="in", action="ACCEPT", proto="tcp", dport="22", source="0.0.0.0/0", enable=1
        )

    def open_ssh_on_group(self, group: str) -> None:
        self.px.cluster.firewall.groups(group).post(
            type="in", action="ACCEPT", proto="tcp", dport="22", source="0.0.0.0/0", enable=1
        )

    def delete_group_rule(self, group: str, dport: str) -> None:
        rule = next(r for r in self.px.cluster.firewall.groups(group).get() if str(r.get("dport")) == dport)
        self.px.cluster.firewall.groups(group)(rule["pos"]).delete()

    def snat_off(self, vnet: str, subnet: str) -> None:
        """What unticking SNAT in the web UI sends, then the SDN apply."""
        self.px.cluster.sdn.vnets(vnet).subnets(subnet).put(delete="snat")
        self.px.cluster.sdn.put()

    def delete_subnet(self, vnet: str, subnet: str) -> None:
        self.px.cluster.sdn.vnets(vnet).subnets(subnet).delete()
        self.px.cluster.sdn.put()

    def delete_iso(self, node: str, volid: str) -> None:
        storage = volid.split(":", 1)[0]
        self.wait(node, self.px.nodes(node).storage(storage).content(volid).delete())

    def stray_vm(self, node: str, name: str, token: str) -> int:
        """A VM made by hand that carries the job's tag token (copied from one of its VMs, say)."""
        vmid = int(self.px.cluster.nextid.get())
        self.wait(node, self.px.nodes(node).qemu.post(vmid=vmid, name=name, tags=f"{token};handmade"))
        return vmid

    def delete_template(self, node: str, vmid: int) -> None:
        self.wait(node, self.qemu(node, vmid).delete())

    def mutations(self, serving: Serving) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _ in serving.run(lambda: list(serving.pve.requests)) if m != "GET"]


def iso_address(volid: str) -> str:
    return f"{T}file.{volid.rpartition('/')[2]}"


def group_name(job_id: str) -> str:
    return naming.security_group(job_id)
