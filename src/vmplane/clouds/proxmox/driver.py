"""The Proxmox VE driver: CloudDriver over the cluster's HTTPS API, one module per object kind.

What Proxmox lacks against AWS and GCP is in `capabilities`: Fixed pools only (no cloud autoscaler), no
load balancer or certificate service, no cloud scheduler. Egress is NAT through the node (SDN SNAT).
"""

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
from vmplane.clouds.proxmox import agent_exec as pve_exec
from vmplane.clouds.proxmox import (
    compute,
    firewall,
    inventory,
    network,
    ownership,
    power,
    preflight,
    repair,
    retag,
    rotation,
    templates,
)
from vmplane.clouds.proxmox import drift as pve_drift
from vmplane.clouds.proxmox import plan as pve_plan
from vmplane.clouds.proxmox.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.secrets import EnvSecretAccess
from vmplane.clouds.proxmox.session import Pve, PveTarget
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.envspec.secrets import secret_refs
from vmplane.state import InfraConfig


# The NoCloud ISO holds user-data as a file: the limit is vmplane's own (cloud-init reads far larger),
# kept at the other clouds' so one bootstrap fits all.
class ProxmoxDriver(CloudDriver):
    cloud = Cloud.proxmox
    capabilities = CAPABILITIES  # clouds/proxmox/capabilities.py: readable without the API client

    def __init__(self, target: PveTarget) -> None:
        self.target = target
        self.pve = Pve(target)

    def validate(self, spec: EnvSpec) -> list[str]:
        return static_problems(spec)

    def preflight(self, ctx: Context) -> None:
        # First, and without the cluster: an `env:` variable unset here would fail the push at the end.
        self.secret_access().refuse_unreadable(secret_refs(ctx.spec))
        preflight.preflight(self.pve, ctx)

    def secret_access(self) -> SecretAccess:
        return EnvSecretAccess()

    def ensure_network(self, ctx: Context) -> None:
        ownership.ensure_pool(self.pve, ctx)
        network.ensure_network(self.pve, ctx)
        firewall.ensure_security_group(self.pve, ctx)

    def ensure_identity(self, ctx: Context) -> None:
        # Proxmox VMs carry no cloud identity: the exec channel is gated by PVE permissions on the API
        # token, which `vmplane proxmox init-node` creates. Nothing to make.
        ctx.log("no instance identity on Proxmox VE: exec is gated by the API token's PVE permissions")

    def ensure_launch_templates(self, ctx: Context) -> None:
        templates.ensure_templates(self.pve, ctx)

    def ensure_vms(self, ctx: Context) -> None:
        compute.ensure_vms(self.pve, ctx)

    def rotate_pool(self, ctx: Context, pool_name: str) -> list[str]:
        return rotation.rotate_pool(self.pve, ctx, pool_name)

    def stop_pool(self, ctx: Context, pool_name: str) -> None:
        power.stop_pool(self.pve, ctx, pool_name)

    def start_pool(self, ctx: Context, pool_name: str) -> None:
        power.start_pool(self.pve, ctx, pool_name)

    def update_tags(self, ctx: Context) -> None:
        retag.retag(self.pve, ctx)

    def delete_vms(self, ctx: Context) -> None:
        compute.delete_vms(self.pve, ctx)

    def delete_launch_templates(self, ctx: Context) -> None:
        templates.delete_templates(self.pve, ctx)

    def delete_security_group(self, ctx: Context) -> None:
        firewall.delete_security_group(self.pve, ctx)

    def delete_identity(self, ctx: Context) -> None:
        ctx.log("no instance identity on Proxmox VE: nothing to delete")

    def delete_network(self, ctx: Context) -> None:
        network.delete_network(self.pve, ctx)
        ownership.delete_pool(self.pve, ctx)

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return inventory.leftovers(self.pve, ctx)

    def drift(self, ctx: Context) -> list[Drift]:
        return pve_drift.drift(self.pve, ctx)

    def repair_drift(self, ctx: Context) -> None:
        repair.repair_drift(self.pve, ctx)

    def run_command(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        return pve_exec.run(self.pve, instance_ids, commands, timeout=timeout)

    def session_hint(self, vm_id: str) -> SessionHint:
        return pve_exec.session_hint(self.pve, vm_id)

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return pve_plan.provision_resources(spec, infra)

    def lb_resources(self, spec: EnvSpec) -> list[PlannedResource]:
        return []

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return pve_plan.teardown_resources(infra)

    def lb_teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return []

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        ids = pve_ids(infra)
        return {
            "endpoint": self.target.endpoint,
            "nodes": list(self.target.nodes),
            "pool": ids.Pool,
            "bridge": infra.NetworkID,
            "subnet": ids.SubnetCidr,
            "securityGroup": ids.SecurityGroup,
        }
