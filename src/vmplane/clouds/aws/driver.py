"""The AWS driver: CloudDriver over boto3, one module per resource kind."""

from __future__ import annotations

import shutil
from typing import Any

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
    preflight,
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
from vmplane.clouds.aws.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.base import (
    CloudDriver,
    CommandResult,
    Context,
    Leftover,
    PlannedResource,
    SessionHint,
)
from vmplane.clouds.drift import Drift
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.state import InfraConfig


class AwsDriver(CloudDriver):
    cloud = Cloud.aws
    capabilities = CAPABILITIES  # clouds/aws/capabilities.py: readable without boto3 (`vmplane validate`)

    def __init__(self, target: AwsTarget) -> None:
        self.target = target
        self.aws = AwsClients(target)

    def validate(self, spec: EnvSpec) -> list[str]:
        return static_problems(spec)  # the capability check, and the secrets policy's size

    def preflight(self, ctx: Context) -> None:
        aws_ids(ctx.infra)  # the record's AWS part exists before the threads below write into it
        side_by_side(  # independent lookups (they write different fields of the record)
            lambda: preflight.preflight(self.aws, ctx),
            lambda: lb.preflight(self.aws, ctx) if ctx.spec.load_balancer is not None else None,
        )

    def ensure_network(self, ctx: Context) -> None:
        network.ensure_network(self.aws, ctx)

    def ensure_identity(self, ctx: Context) -> None:
        iam.ensure_identity(self.aws, ctx)
        if ctx.spec.load_balancer is not None:
            # Needs only the spec and the hosted zone: requested beside the network, so its DNS
            # validation (minutes on AWS) runs while the network, the ALB and the VMs are built.
            certs.request(self.aws, ctx)

    def secret_access(self) -> SecretAccess:
        return AwsSecretAccess(self.aws)

    def ensure_launch_templates(self, ctx: Context) -> None:
        templates.ensure_launch_templates(self.aws, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.aws, ctx)

    def ensure_load_balancer(self, ctx: Context) -> None:
        lb.ensure_load_balancer(self.aws, ctx)

    def ensure_target_group(self, ctx: Context) -> None:
        lb.ensure_target_group(self.aws, ctx)

    def ensure_listener(self, ctx: Context) -> None:
        lb.ensure_listener(self.aws, ctx)

    def ensure_dns_record(self, ctx: Context) -> None:
        lb.ensure_dns_record(self.aws, ctx)

    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None:
        lb_teardown.detach(self.aws, ctx, keep_vms=keep_vms)

    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        return rotation.rotate_pool(self.aws, ctx, pool_name)

    def update_tags(self, ctx: Context) -> None:
        retag.retag(self.aws, ctx)

    def ensure_schedules(self, ctx: Context) -> None:
        schedules.ensure_schedules(self.aws, ctx)

    def delete_schedules(self, ctx: Context) -> None:
        schedules.delete_schedules(self.aws, ctx)

    def stop_pool(self, ctx: Context, pool_name: str) -> None:
        pool_power.stop_pool(self.aws, ctx, pool_name)

    def start_pool(self, ctx: Context, pool_name: str) -> None:
        pool_power.start_pool(self.aws, ctx, pool_name)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.aws, ctx)

    def delete_launch_templates(self, ctx: Context) -> None:
        templates.delete_launch_templates(self.aws, ctx)

    def delete_security_group(self, ctx: Context) -> None:
        security_groups.delete_security_group(self.aws, ctx)

    def delete_identity(self, ctx: Context) -> None:
        iam.delete_identity(self.aws, ctx)

    def delete_network(self, ctx: Context) -> None:
        network_teardown.delete_network(self.aws, ctx)

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.aws, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return aws_drift.drift(self.aws, ctx)

    def repair_drift(self, ctx: Context) -> None:
        repair.repair_drift(self.aws, ctx)

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return aws_exec.run(self.aws, instance_ids, commands, comment=comment, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        argv = ["aws", "ssm", "start-session", "--target", vm_id, "--region", self.target.region]
        if self.target.profile:
            argv += ["--profile", self.target.profile]
        plugin = "session-manager-plugin"
        return SessionHint(argv=argv, needs=None if shutil.which(plugin) else plugin)

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.provision_resources(spec, infra)

    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return aws_plan.lb_resources(spec)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.teardown_resources(infra)

    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.lb_teardown_resources(infra)

    def early_steps(self) -> frozenset[str]:
        return frozenset({"stepDeleteNetwork"})  # deletes the NAT gateway first (network_teardown)

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        return {"vpcId": infra.NetworkID, "privateSubnetIds": infra.VMSubnetIDs, "accountId": aws_ids(infra).AccountID}
