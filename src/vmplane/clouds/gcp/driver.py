"""The Google Cloud driver: the composition of its parts (clouds/gcp/parts.py) over google-cloud-compute
(REST) and google-api-python-client, one module per resource kind (like clouds/aws/)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vmplane.clouds.base import CloudDriver, Context, PlannedResource
from vmplane.clouds.errors import CloudError
from vmplane.clouds.gcp import images, preflight
from vmplane.clouds.gcp import plan as gcp_plan
from vmplane.clouds.gcp.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.parts import (
    GcpExec,
    GcpIdentity,
    GcpInventory,
    GcpLoadBalancer,
    GcpNetwork,
    GcpPools,
    GcpScheduler,
)
from vmplane.clouds.gcp.secrets import GcpSecretAccess
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.clouds.secret_access import SecretAccess
from vmplane.clouds.steps import Step, changed
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.state import InfraConfig


class GcpDriver(CloudDriver):
    cloud = Cloud.gcp
    capabilities = CAPABILITIES  # clouds/gcp/capabilities.py: readable without the Google clients

    def __init__(self, target: GcpTarget) -> None:
        self.target = target
        self.gcp = GcpClients(target)
        self.network = GcpNetwork(self.gcp)
        self.identity = GcpIdentity(self.gcp)
        self.pools = GcpPools(self.gcp)
        self.lb = GcpLoadBalancer(self.gcp)
        self.exec_channel = GcpExec(self.gcp)
        self.scheduler = GcpScheduler(self.gcp)
        self.inventory = GcpInventory(self.gcp)

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

    def steps(self, table: Sequence[Step]) -> list[Step]:
        # The record's wait needs the managed certificate, which the listener step makes with the proxy.
        return changed(list(table), "stepCreateDNSRecord", needs=("stepCreateLoadBalancer", "stepCreateListener"))

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.provision_resources(spec, infra, self.target.project)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return gcp_plan.teardown_resources(infra)

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
