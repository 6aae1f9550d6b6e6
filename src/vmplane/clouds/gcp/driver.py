"""The Google Cloud driver: CloudDriver over google-cloud-compute (REST) and google-api-python-client,
one module per resource kind (like clouds/aws/)."""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import (
    CloudDriver,
    CommandResult,
    Context,
    Leftover,
    PlannedResource,
    SessionHint,
)
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import CloudError, InvalidRequestError
from vmplane.clouds.gcp import (
    compute,
    firewall,
    identity,
    images,
    inventory,
    lb,
    lb_teardown,
    network,
    power,
    preflight,
    retag,
    rotation,
    schedules,
    templates,
)
from vmplane.clouds.gcp import drift as gcp_drift
from vmplane.clouds.gcp import exec as gcp_exec
from vmplane.clouds.gcp import plan as gcp_plan
from vmplane.clouds.gcp import repair as gcp_repair
from vmplane.clouds.gcp.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.secrets import GcpSecretAccess
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.state import InfraConfig


class GcpDriver(CloudDriver):
    cloud = Cloud.gcp
    capabilities = CAPABILITIES  # clouds/gcp/capabilities.py: readable without the Google clients

    def __init__(self, target: GcpTarget) -> None:
        self.target = target
        self.gcp = GcpClients(target)

    def validate(self, spec: EnvSpec) -> list[str]:
        out = static_problems(spec)  # capabilities and schedules; then the image references
        for name, pool in spec.pools.items():
            try:
                project = images.image_ref(pool.image)[0]
            except CloudError as e:
                out.append(f"pools.{name}.image: {e.args[0]}")
                continue
            if project in images.NO_CLOUD_INIT:
                out.append(
                    f"pools.{name}.image: {pool.image} comes from {project}, whose images do not run cloud-init, "
                    "which carries vmplane's bootstrap; use ubuntu-24.04 or an image with cloud-init"
                )
        return out

    def preflight(self, ctx: Context) -> None:
        preflight.preflight(self.gcp, ctx)

    def ensure_network(self, ctx: Context) -> None:
        network.ensure_network(self.gcp, ctx)
        firewall.ensure_firewall(self.gcp, ctx)

    def ensure_identity(self, ctx: Context) -> None:
        identity.ensure_identity(self.gcp, ctx)

    def ensure_launch_templates(self, ctx: Context) -> None:
        templates.ensure_templates(self.gcp, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.gcp, ctx)

    def ensure_load_balancer(self, ctx: Context) -> None:
        lb.ensure_frontend(self.gcp, ctx)

    def ensure_target_group(self, ctx: Context) -> None:
        lb.ensure_backend(self.gcp, ctx)

    def ensure_listener(self, ctx: Context) -> None:
        lb.ensure_listeners(self.gcp, ctx)

    def ensure_dns_record(self, ctx: Context) -> None:
        lb.ensure_dns_record(self.gcp, ctx)

    def detach_load_balancer(self, ctx: Context, *, keep_vms: bool) -> None:
        lb_teardown.detach(self.gcp, ctx, keep_vms=keep_vms)

    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        if pool_name in ctx.infra.StoppedPools:
            raise InvalidRequestError(f"pool {pool_name} is stopped: `vmplane start` it before rotating its VMs")
        return rotation.rotate_pool(self.gcp, ctx, pool_name)

    def ensure_schedules(self, ctx: Context) -> None:
        schedules.ensure_schedules(self.gcp, ctx)

    def delete_schedules(self, ctx: Context) -> None:
        schedules.delete_schedules(self.gcp, ctx)

    def stop_pool(self, ctx: Context, pool_name: str) -> None:
        power.stop_pool(self.gcp, ctx, pool_name)

    def start_pool(self, ctx: Context, pool_name: str) -> None:
        power.start_pool(self.gcp, ctx, pool_name)

    def update_tags(self, ctx: Context) -> None:
        retag.retag(self.gcp, ctx)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.gcp, ctx)

    def delete_launch_templates(self, ctx: Context) -> None:
        templates.delete_templates(self.gcp, ctx)

    def delete_security_group(self, ctx: Context) -> None:
        firewall.delete_firewall(self.gcp, ctx)

    def delete_identity(self, ctx: Context) -> None:
        identity.delete_identity(self.gcp, ctx)

    def delete_network(self, ctx: Context) -> None:
        network.delete_network(self.gcp, ctx)

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.gcp, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return gcp_drift.drift(self.gcp, ctx)

    def repair_drift(self, ctx: Context) -> None:
        gcp_repair.repair_drift(self.gcp, ctx)

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return gcp_exec.run(self.gcp, instance_ids, commands, comment=comment, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        return gcp_exec.session_hint(self.gcp, vm_id)

    def step_dependencies(self) -> dict[str, list[str]]:
        # The record's wait needs the managed certificate, which the listener step makes with the proxy.
        deps = super().step_dependencies()
        deps["stepCreateDNSRecord"] = ["stepCreateLoadBalancer", "stepCreateListener"]
        return deps

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.provision_resources(spec, infra, self.target.project)

    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return gcp_plan.lb_resources(spec)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.teardown_resources(infra)

    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.lb_teardown_resources(infra)

    def secret_access(self) -> SecretAccess:
        return GcpSecretAccess(self.gcp)

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        ids = gcp_ids(infra)
        # The network, subnetworks and the LB's address are in the neutral outputs already
        # (networkId, vmSubnetIds, loadBalancer.dnsName): only what is GCP's own goes here.
        return {
            "project": self.target.project,
            "serviceAccount": ids.ServiceAccountEmail,
            "certificateStatus": ids.CertificateStatus,
        }
