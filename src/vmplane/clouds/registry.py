"""Which driver serves a target. Drivers are imported lazily: boto3 alone costs ~0.3 s of CLI start-up."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.models import Cloud
from vmplane.target import Target


def _aws(target: Target) -> CloudDriver:
    from vmplane.clouds.aws.driver import AwsDriver
    from vmplane.clouds.aws.session import AwsTarget

    return AwsDriver(AwsTarget(region=target.region, profile=target.profile, endpoint_url=target.endpoint_url))


def _azure(target: Target) -> CloudDriver:
    from vmplane.clouds.azure import AzureDriver

    return AzureDriver()


FACTORIES: dict[Cloud, Callable[[Target], CloudDriver]] = {Cloud.aws: _aws, Cloud.azure: _azure}


@lru_cache(maxsize=16)
def driver_for(target: Target) -> CloudDriver:
    """One driver per target and process: a boto3 session and its clients cost ~0.1-0.3 s to build."""
    factory = FACTORIES.get(target.cloud)
    if factory is None:
        if target.sandbox:
            raise UnsupportedError(f"the sandbox emulates AWS only; provider.cloud is {target.cloud.value}")
        raise UnsupportedError(
            f"provider.cloud {target.cloud.value!r} is not implemented yet (AWS is; Google Cloud is next)",
            code="NotImplemented",
        )
    return factory(target)
