"""The driver's former one-method-per-step surface, each a one-line call of the part that does it now.

Transitional: kept so callers outside the pipeline (the per-cloud sweep and lifecycle tests, the runtime
push, the CLI) keep working while they move to the parts (`driver.network.ensure(ctx)` ...). New code calls
the parts; nothing here holds logic, and a missing part raises the typed UnsupportedError, as before.
"""

from __future__ import annotations

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.interfaces import LoadBalancer, Parts
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.clouds.records import CommandResult, Leftover, PlannedResource, SessionHint
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


class StepMethods(Parts):
    def load_balancer(self) -> LoadBalancer:
        """The LB part, or the typed refusal of a driver without one."""
        if self.lb is None:
            raise self.unsupported("load balancers")
        return self.lb

    def ensure_network(self, ctx: Context) -> None:
        self.network.ensure(ctx)

    def ensure_identity(self, ctx: Context) -> None:
        create_identity(self, ctx)

    def ensure_launch_templates(self, ctx: Context) -> None:
        self.pools.ensure_templates(ctx)

    def ensure_vms(self, ctx: Context) -> None:
        self.pools.ensure_vms(ctx)

    def ensure_load_balancer(self, ctx: Context) -> None:
        self.load_balancer().ensure_frontend(ctx)

    def ensure_target_group(self, ctx: Context) -> None:
        self.load_balancer().ensure_backend(ctx)

    def ensure_listener(self, ctx: Context) -> None:
        self.load_balancer().ensure_listener(ctx)

    def ensure_dns_record(self, ctx: Context) -> None:
        self.load_balancer().ensure_dns_record(ctx)

    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None:
        if self.lb is not None:  # a driver without LBs has nothing to remove
            self.lb.detach(ctx, keep_vms=keep_vms)

    def update_tags(self, ctx: Context) -> None:
        self.inventory.retag(ctx)

    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        return self.pools.rotate(ctx, pool_name)

    def ensure_schedules(self, ctx: Context) -> None:
        if self.scheduler is not None:
            self.scheduler.ensure(ctx)

    def delete_schedules(self, ctx: Context) -> None:
        if self.scheduler is not None:
            self.scheduler.delete(ctx)

    def stop_pool(self, ctx: Context, pool_name: str) -> None:
        self.pools.stop(ctx, pool_name)

    def start_pool(self, ctx: Context, pool_name: str) -> None:
        self.pools.start(ctx, pool_name)

    def delete_vms(self, ctx: Context) -> None:
        self.pools.delete_vms(ctx)

    def delete_launch_templates(self, ctx: Context) -> None:
        self.pools.delete_templates(ctx)

    def delete_security_group(self, ctx: Context) -> None:
        self.network.delete_firewall(ctx)

    def delete_identity(self, ctx: Context) -> None:
        delete_identity(self, ctx)

    def delete_network(self, ctx: Context) -> None:
        self.network.delete(ctx)

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return self.inventory.leftovers(ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return self.inventory.drift(ctx)

    def repair_drift(self, ctx: Context) -> None:
        self.inventory.repair_drift(ctx)

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return self.exec_channel.run(instance_ids, commands, timeout, comment)

    def session_hint(self, vm_id: str) -> SessionHint:
        return self.exec_channel.session_hint(vm_id)

    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return self.lb.resources(spec) if self.lb is not None else []

    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return self.lb.teardown_resources(infra) if self.lb is not None else []
