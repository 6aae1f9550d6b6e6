"""The Proxmox VE driver's parts (`clouds.interfaces`). Proxmox has no identity, load balancer or scheduler
part: the driver leaves them None, and its capabilities say the same."""

from __future__ import annotations

from dataclasses import dataclass

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.interfaces import ExecChannel, Inventory, Network, Pools
from vmplane.clouds.proxmox import agent_exec as pve_exec
from vmplane.clouds.proxmox import (
    compute,
    firewall,
    inventory,
    network,
    ownership,
    power,
    repair,
    retag,
    rotation,
    templates,
)
from vmplane.clouds.proxmox import drift as pve_drift
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.records import CommandResult, Leftover, SessionHint


@dataclass
class PveNetwork(Network):
    pve: Pve

    def ensure(self, ctx: Context) -> None:
        ownership.ensure_pool(self.pve, ctx)  # the resource pool every object of the job joins
        network.ensure_network(self.pve, ctx)
        firewall.ensure_security_group(self.pve, ctx)

    def delete_firewall(self, ctx: Context) -> None:
        firewall.delete_security_group(self.pve, ctx)

    def delete(self, ctx: Context) -> None:
        network.delete_network(self.pve, ctx)
        ownership.delete_pool(self.pve, ctx)


@dataclass
class PvePools(Pools):
    pve: Pve

    def ensure_templates(self, ctx: Context) -> None:
        templates.ensure_templates(self.pve, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.pve, ctx)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.pve, ctx)

    def delete_templates(self, ctx: Context) -> None:
        templates.delete_templates(self.pve, ctx)

    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        return rotation.rotate_pool(self.pve, ctx, pool_name)

    def stop(self, ctx: Context, pool_name: str) -> None:
        power.stop_pool(self.pve, ctx, pool_name)

    def start(self, ctx: Context, pool_name: str) -> None:
        power.start_pool(self.pve, ctx, pool_name)


@dataclass
class PveExec(ExecChannel):
    pve: Pve

    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return pve_exec.run(self.pve, instance_ids, commands, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        return pve_exec.session_hint(self.pve, vm_id)


@dataclass
class PveInventory(Inventory):
    pve: Pve

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.pve, ctx)

    def retag(self, ctx: Context) -> None:
        retag.retag(self.pve, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return pve_drift.drift(self.pve, ctx)

    def repair_drift(self, ctx: Context) -> None:
        repair.repair_drift(self.pve, ctx)
