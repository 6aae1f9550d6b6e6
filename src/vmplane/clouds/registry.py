"""Which driver serves a target. Drivers are imported lazily: boto3 alone costs ~0.3 s of CLI start-up,
the Google clients about as much."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.target import Target


def _aws(target: Target) -> CloudDriver:
    from vmplane.clouds.aws.driver import AwsDriver
    from vmplane.clouds.aws.session import AwsTarget

    return AwsDriver(AwsTarget(region=target.region, profile=target.profile, endpoint_url=target.endpoint_url))


def _gcp(target: Target) -> CloudDriver:
    from vmplane.clouds.gcp.driver import GcpDriver
    from vmplane.clouds.gcp.session import GcpTarget

    # Target.for_spec always sets the project from provider.project; only a hand-built Target lacks it,
    # and then the first call (stepValidate's projects.get) fails naming the empty project.
    return GcpDriver(GcpTarget(project=target.project or "", region=target.region, endpoint_url=target.endpoint_url))


def _proxmox(target: Target) -> CloudDriver:
    from vmplane.clouds.proxmox.driver import ProxmoxDriver
    from vmplane.clouds.proxmox.session import PveTarget

    if target.sandbox:
        raise UnsupportedError(
            "the sandbox emulates AWS and Google Cloud only; a Proxmox environment needs a Proxmox VE API "
            "(provider.endpoint)"
        )
    nodes = tuple(n for n in target.region.split(",") if n)
    return ProxmoxDriver(
        PveTarget(endpoint=target.api_endpoint or "", nodes=nodes, ca_file=target.ca_file, verify_tls=target.verify_tls)
    )


def _azure(target: Target) -> CloudDriver:
    from vmplane.clouds.azure import AzureDriver

    return AzureDriver()


FACTORIES: dict[Cloud, Callable[[Target], CloudDriver]] = {
    Cloud.aws: _aws,
    Cloud.gcp: _gcp,
    Cloud.azure: _azure,
    Cloud.proxmox: _proxmox,
}


def static_problems(spec: EnvSpec) -> list[str]:
    """What `spec` asks that its cloud's driver cannot do (the capability check), each naming the field,
    with no target, credentials, network or cloud SDK import (`vmplane validate`). The driver's own
    `validate` (plan, apply, stepValidate) checks the same and, on Google Cloud, the image references."""
    cloud = spec.provider.cloud
    if cloud is Cloud.aws:
        from vmplane.clouds.aws.capabilities import static_problems as aws

        return aws(spec)
    if cloud is Cloud.gcp:
        from vmplane.clouds.gcp.capabilities import static_problems as gcp

        return gcp(spec)
    if cloud is Cloud.proxmox:
        from vmplane.clouds.proxmox.capabilities import static_problems as pve

        return pve(spec)
    from vmplane.clouds.azure import AzureDriver

    return AzureDriver().validate(spec)  # raises ProviderInvalidError: nothing runs on Azure yet


@lru_cache(maxsize=16)
def driver_for(target: Target) -> CloudDriver:
    """One driver per target and process: a boto3 session and its clients cost ~0.1-0.3 s to build."""
    factory = FACTORIES.get(target.cloud)
    if factory is None:
        if target.sandbox:
            raise UnsupportedError(
                f"the sandbox emulates AWS and Google Cloud only; provider.cloud is {target.cloud.value}"
            )
        raise UnsupportedError(
            f"provider.cloud {target.cloud.value!r} is not implemented yet (AWS, Google Cloud and Proxmox VE are)",
            code="NotImplemented",
        )
    return factory(target)
