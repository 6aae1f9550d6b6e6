"""The AWS driver's parts (`clouds.interfaces`), each a thin binding of one concern's modules to the clients."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from vmplane.clouds.aws import (
    certs,
    compute,
    iam,
    inventory,
    lb,
    lb_teardown,
    network,
    network_teardown,
    pool_power,
    repair,
    retag,
    rotation,
    schedules,
    security_groups,
    templates,
)
from vmplane.clouds.aws import drift as aws_drift
from vmplane.clouds.aws import exec as aws_exec
from vmplane.clouds.aws import plan as aws_plan
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.interfaces import ExecChannel, Identity, Inventory, LoadBalancer, Network, Pools, Scheduler
from vmplane.clouds.records import CommandResult, Leftover, PlannedResource, SessionHint
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


@dataclass
class AwsNetwork(Network):
    aws: AwsClients

    def ensure(self, ctx: Context) -> None:
        network.ensure_network(self.aws, ctx)

    def delete_firewall(self, ctx: Context) -> None:
        security_groups.delete_security_group(self.aws, ctx)

    def delete(self, ctx: Context) -> None:
        network_teardown.delete_network(self.aws, ctx)


@dataclass
class AwsIdentity(Identity):
    aws: AwsClients

    def ensure(self, ctx: Context) -> None:
        iam.ensure_identity(self.aws, ctx)

    def delete(self, ctx: Context) -> None:
        iam.delete_identity(self.aws, ctx)


@dataclass
class AwsPools(Pools):
    aws: AwsClients

    def ensure_templates(self, ctx: Context) -> None:
        templates.ensure_launch_templates(self.aws, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.aws, ctx)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.aws, ctx)

    def delete_templates(self, ctx: Context) -> None:
        templates.delete_launch_templates(self.aws, ctx)

    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        return rotation.rotate_pool(self.aws, ctx, pool_name)

    def stop(self, ctx: Context, pool_name: str) -> None:
        pool_power.stop_pool(self.aws, ctx, pool_name)

    def start(self, ctx: Context, pool_name: str) -> None:
        pool_power.start_pool(self.aws, ctx, pool_name)


@dataclass
class AwsLoadBalancer(LoadBalancer):
    aws: AwsClients

    def prepare(self, ctx: Context) -> None:
        # Needs only the spec and the hosted zone: requested in stepCreateIAM, beside the network, so its
        # DNS validation (minutes on AWS) runs while the network, the ALB and the VMs are built.
        certs.request(self.aws, ctx)

    def ensure_frontend(self, ctx: Context) -> None:
        lb.ensure_load_balancer(self.aws, ctx)

    def ensure_backend(self, ctx: Context) -> None:
        lb.ensure_target_group(self.aws, ctx)

    def ensure_listener(self, ctx: Context) -> None:
        lb.ensure_listener(self.aws, ctx)

    def ensure_dns_record(self, ctx: Context) -> None:
        lb.ensure_dns_record(self.aws, ctx)

    def detach(self, ctx: Context, *, keep_vms: bool) -> None:
        lb_teardown.detach(self.aws, ctx, keep_vms=keep_vms)

    def resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return aws_plan.lb_resources(spec)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.lb_teardown_resources(infra)


@dataclass
class AwsExec(ExecChannel):
    aws: AwsClients
    target: AwsTarget

    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return aws_exec.run(self.aws, instance_ids, commands, comment=comment, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        argv = ["aws", "ssm", "start-session", "--target", vm_id, "--region", self.target.region]
        if self.target.profile:
            argv += ["--profile", self.target.profile]
        plugin = "session-manager-plugin"
        return SessionHint(argv=argv, needs=None if shutil.which(plugin) else plugin)


@dataclass
class AwsScheduler(Scheduler):
    aws: AwsClients

    def ensure(self, ctx: Context) -> None:
        schedules.ensure_schedules(self.aws, ctx)

    def delete(self, ctx: Context) -> None:
        schedules.delete_schedules(self.aws, ctx)


@dataclass
class AwsInventory(Inventory):
    aws: AwsClients

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.aws, ctx)

    def retag(self, ctx: Context) -> None:
        retag.retag(self.aws, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return aws_drift.drift(self.aws, ctx)

    def repair_drift(self, ctx: Context) -> None:
        repair.repair_drift(self.aws, ctx)
