"""The Proxmox VE driver: the composition of its parts (clouds/proxmox/parts.py) over the cluster's HTTPS API.

What Proxmox lacks against AWS and GCP is a missing part and in `capabilities`: Fixed pools only (no cloud
autoscaler), no instance identity, no load balancer or certificate service, no cloud scheduler. Egress is
NAT through the node (SDN SNAT).
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import CloudDriver, Context, PlannedResource
from vmplane.clouds.proxmox import plan as pve_plan
from vmplane.clouds.proxmox import preflight
from vmplane.clouds.proxmox.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.parts import PveExec, PveInventory, PveNetwork, PvePools
from vmplane.clouds.proxmox.secrets import EnvSecretAccess
from vmplane.clouds.proxmox.session import Pve, PveTarget
from vmplane.clouds.secret_access import SecretAccess
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.envspec.secrets import secret_refs
from vmplane.state import InfraConfig


class ProxmoxDriver(CloudDriver):
    cloud = Cloud.proxmox
    capabilities = CAPABILITIES  # clouds/proxmox/capabilities.py: readable without the API client
    # The exec channel is gated by PVE permissions on the API token, which `vmplane proxmox init-node` creates.
    no_identity = "no instance identity on Proxmox VE"
    no_identity_why = "exec is gated by the API token's PVE permissions"

    def __init__(self, target: PveTarget) -> None:
        self.target = target
        self.pve = Pve(target)
        self.network = PveNetwork(self.pve)
        self.identity = None
        self.pools = PvePools(self.pve)
        self.lb = None
        self.exec_channel = PveExec(self.pve)
        self.scheduler = None
        self.inventory = PveInventory(self.pve)

    def validate(self, spec: EnvSpec) -> list[str]:
        return static_problems(spec)

    def preflight(self, ctx: Context) -> None:
        # First, and without the cluster: an `env:` variable unset here would fail the push at the end.
        self.secret_access().refuse_unreadable(secret_refs(ctx.spec))
        preflight.preflight(self.pve, ctx)

    def secret_access(self) -> SecretAccess:
        return EnvSecretAccess()

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return pve_plan.provision_resources(spec, infra)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return pve_plan.teardown_resources(infra)

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
