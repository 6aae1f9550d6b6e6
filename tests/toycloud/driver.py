"""The toy driver: the composition of its parts over one JSON file (tests/toycloud/cloud.py). Fixed pools
only, no identity, no load balancer, no scheduler; drift read and repaired."""

from __future__ import annotations

from typing import Any

from tests.toycloud import naming
from tests.toycloud.cloud import ToyCloud
from tests.toycloud.parts import ToyExec, ToyInventory, ToyNetwork, ToyPools
from tests.toycloud.spec import TOY

from vmplane.clouds.base import Action, Capabilities, CloudDriver, Context, PlannedResource, TagRules
from vmplane.clouds.capabilities import capability_problems
from vmplane.envspec.models import EnvSpec, ExecMode, FixedPool
from vmplane.state import InfraConfig
from vmplane.target import Target

CAPABILITIES = Capabilities(
    pool_modes=frozenset({"fixed"}),
    load_balancers=False,
    cert_sources=frozenset(),
    instance_refresh=False,
    exec_modes=frozenset({ExecMode.SSM}),
    exec_payload_bytes=64 * 1024,
    user_data_bytes=64 * 1024,
    tags=TagRules(style="key_value", key_pattern=r"^[A-Za-z0-9_.:/=+@-]{1,128}$", max_key=128, max_value=256),
    drift=True,
)


def static_problems(spec: EnvSpec) -> list[str]:
    return capability_problems(spec, CAPABILITIES, TOY)


class ToyDriver(CloudDriver):
    cloud = TOY
    capabilities = CAPABILITIES
    no_identity = "no instance identity on the toy cloud"

    def __init__(self, target: Target) -> None:
        self.target = target
        self.toy = ToyCloud(target.api_endpoint or "")  # none: every call refuses (the driver still builds)
        self.network = ToyNetwork(self.toy)
        self.identity = None
        self.pools = ToyPools(self.toy)
        self.lb = None
        self.exec_channel = ToyExec(self.toy)
        self.scheduler = None
        self.inventory = ToyInventory(self.toy)

    def validate(self, spec: EnvSpec) -> list[str]:
        return static_problems(spec)

    def preflight(self, ctx: Context) -> None:
        self.toy.list("network")  # the file is readable (a broken one fails here, before anything is made)

    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        def plus(kind: str, name: str, step: str) -> PlannedResource:
            return PlannedResource(Action.create, naming.TYPES[kind], name, step)

        out = [] if spec.network.existing_network else [plus("network", naming.network(spec), "stepCreateNetwork")]
        out.append(plus("firewall", naming.firewall(spec), "stepCreateNetwork"))
        out += [plus("template", naming.template(spec, p), "stepCreateLaunchTemplate") for p in spec.pools]
        for pool_name, pool in spec.pools.items():
            if isinstance(pool, FixedPool):
                out += [plus("vm", naming.vm(spec, pool_name, i), "stepCreateVMs") for i in range(pool.size)]
        return out

    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        def minus(kind: str, name: str, step: str) -> PlannedResource:
            return PlannedResource(Action.destroy, naming.TYPES[kind], name, step)

        out = [minus("vm", v.Name, "stepTerminateVMs") for v in infra.VMs]
        out += [minus("template", tid, "stepDeleteLaunchTemplate") for tid in infra.LaunchTemplateID.values()]
        if infra.VMSecurityGroupID:
            out.append(minus("firewall", infra.VMSecurityGroupID, "stepDeleteSecurityGroup"))
        if infra.NetworkCreated and infra.NetworkID:
            out.append(minus("network", infra.NetworkID, "stepDeleteNetwork"))
        return out

    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        return {"stateFile": self.target.api_endpoint}
