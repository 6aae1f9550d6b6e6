"""The Google Cloud driver's parts (`clouds.interfaces`), each a thin binding of one concern's modules to the
clients. The load balancer's frontend is the address and forwarding side, its backend the backend service."""

from __future__ import annotations

from dataclasses import dataclass

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import (
    compute,
    firewall,
    identity,
    inventory,
    lb,
    lb_teardown,
    network,
    power,
    retag,
    rotation,
    schedules,
    templates,
)
from vmplane.clouds.gcp import drift as gcp_drift
from vmplane.clouds.gcp import exec as gcp_exec
from vmplane.clouds.gcp import plan as gcp_plan
from vmplane.clouds.gcp import repair as gcp_repair
from vmplane.clouds.gcp.session import GcpClients
from vmplane.clouds.interfaces import ExecChannel, Identity, Inventory, LoadBalancer, Network, Pools, Scheduler
from vmplane.clouds.records import CommandResult, Leftover, PlannedResource, SessionHint
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


@dataclass
class GcpNetwork(Network):
    gcp: GcpClients

    def ensure(self, ctx: Context) -> None:
        network.ensure_network(self.gcp, ctx)
        firewall.ensure_firewall(self.gcp, ctx)

    def delete_firewall(self, ctx: Context) -> None:
        firewall.delete_firewall(self.gcp, ctx)

    def delete(self, ctx: Context) -> None:
        network.delete_network(self.gcp, ctx)


@dataclass
class GcpIdentity(Identity):
    gcp: GcpClients

    def ensure(self, ctx: Context) -> None:
        identity.ensure_identity(self.gcp, ctx)

    def delete(self, ctx: Context) -> None:
        identity.delete_identity(self.gcp, ctx)


@dataclass
class GcpPools(Pools):
    gcp: GcpClients

    def ensure_templates(self, ctx: Context) -> None:
        templates.ensure_templates(self.gcp, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.gcp, ctx)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.gcp, ctx)

    def delete_templates(self, ctx: Context) -> None:
        templates.delete_templates(self.gcp, ctx)

    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        if pool_name in ctx.infra.StoppedPools:
            raise InvalidRequestError(f"pool {pool_name} is stopped: `vmplane start` it before rotating its VMs")
        return rotation.rotate_pool(self.gcp, ctx, pool_name)

    def stop(self, ctx: Context, pool_name: str) -> None:
        power.stop_pool(self.gcp, ctx, pool_name)

    def start(self, ctx: Context, pool_name: str) -> None:
        power.start_pool(self.gcp, ctx, pool_name)


@dataclass
class GcpLoadBalancer(LoadBalancer):
    gcp: GcpClients

    def ensure_frontend(self, ctx: Context) -> None:
        lb.ensure_frontend(self.gcp, ctx)

    def ensure_backend(self, ctx: Context) -> None:
        lb.ensure_backend(self.gcp, ctx)

    def ensure_listener(self, ctx: Context) -> None:
        lb.ensure_listeners(self.gcp, ctx)

    def ensure_dns_record(self, ctx: Context) -> None:
        lb.ensure_dns_record(self.gcp, ctx)

    def detach(self, ctx: Context, *, keep_vms: bool) -> None:
        lb_teardown.detach(self.gcp, ctx, keep_vms=keep_vms)

    def resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return gcp_plan.lb_resources(spec)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.lb_teardown_resources(infra)


@dataclass
class GcpExec(ExecChannel):
    gcp: GcpClients

    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return gcp_exec.run(self.gcp, instance_ids, commands, comment=comment, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        return gcp_exec.session_hint(self.gcp, vm_id)


@dataclass
class GcpScheduler(Scheduler):
    gcp: GcpClients

    def ensure(self, ctx: Context) -> None:
        schedules.ensure_schedules(self.gcp, ctx)

    def delete(self, ctx: Context) -> None:
        schedules.delete_schedules(self.gcp, ctx)


@dataclass
class GcpInventory(Inventory):
    gcp: GcpClients

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.gcp, ctx)

    def retag(self, ctx: Context) -> None:
        retag.retag(self.gcp, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return gcp_drift.drift(self.gcp, ctx)

    def repair_drift(self, ctx: Context) -> None:
        gcp_repair.repair_drift(self.gcp, ctx)
