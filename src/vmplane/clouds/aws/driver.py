"""The AWS driver: the composition of its parts (clouds/aws/parts.py) over boto3, one module per resource kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vmplane.clouds.aws import lb, preflight
from vmplane.clouds.aws import plan as aws_plan
from vmplane.clouds.aws.capabilities import CAPABILITIES, static_problems
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.parts import (
    AwsExec,
    AwsIdentity,
    AwsInventory,
    AwsLoadBalancer,
    AwsNetwork,
    AwsPools,
    AwsScheduler,
)
from vmplane.clouds.aws.secrets import AwsSecretAccess
from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.base import CloudDriver, Context, PlannedResource
from vmplane.clouds.parallel import side_by_side
from vmplane.clouds.secret_access import SecretAccess
from vmplane.clouds.steps import Step, changed
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.state import InfraConfig


class AwsDriver(CloudDriver):
    cloud = Cloud.aws
    capabilities = CAPABILITIES  # clouds/aws/capabilities.py: readable without boto3 (`vmplane validate`)

    def __init__(self, target: AwsTarget) -> None:
        self.target = target
        self.aws = AwsClients(target)
        self.network = AwsNetwork(self.aws)
        self.identity = AwsIdentity(self.aws)
        self.pools = AwsPools(self.aws)
        self.lb = AwsLoadBalancer(self.aws)
        self.exec_channel = AwsExec(self.aws, target)
        self.scheduler = AwsScheduler(self.aws)
        self.inventory = AwsInventory(self.aws)

    def validate(self, spec: EnvSpec) -> list[str]:
        return static_problems(spec)  # the capability check, and the secrets policy's size

    def preflight(self, ctx: Context) -> None:
        aws_ids(ctx.infra)  # the record's AWS part exists before the threads below write into it
        side_by_side(  # independent lookups (they write different fields of the record)
            lambda: preflight.preflight(self.aws, ctx),
            lambda: lb.preflight(self.aws, ctx) if ctx.spec.load_balancer is not None else None,
        )

    def secret_access(self) -> SecretAccess:
        return AwsSecretAccess(self.aws)

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.provision_resources(spec, infra)

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        return aws_plan.teardown_resources(infra)

    def steps(self, table: Sequence[Step]) -> list[Step]:
        # Deletes the NAT gateway (about a minute) before it waits for its inputs (network_teardown).
        return changed(list(table), "stepDeleteNetwork", early=True)

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        return {"vpcId": infra.NetworkID, "privateSubnetIds": infra.VMSubnetIDs, "accountId": aws_ids(infra).AccountID}
