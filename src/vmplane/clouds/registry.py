"""Which driver serves a target."""

from __future__ import annotations

from functools import lru_cache

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.models import Cloud
from vmplane.target import Target


@lru_cache(maxsize=16)
def driver_for(target: Target) -> CloudDriver:
    """One driver per target and process: a boto3 session and its clients cost ~0.1-0.3 s to build.
    Drivers are imported lazily: boto3 alone costs ~0.3 s of CLI start-up."""
    if target.cloud is Cloud.aws:
        from vmplane.clouds.aws.driver import AwsDriver
        from vmplane.clouds.aws.session import AwsTarget

        return AwsDriver(AwsTarget(region=target.region, profile=target.profile, endpoint_url=target.endpoint_url))
    if target.cloud is Cloud.azure:
        from vmplane.clouds.azure import AzureDriver

        return AzureDriver()
    if target.sandbox:
        raise UnsupportedError(f"the sandbox emulates AWS only; provider.cloud is {target.cloud.value}")
    raise UnsupportedError(
        f"provider.cloud {target.cloud.value!r} is not implemented yet (AWS is; Google Cloud is next)",
        code="NotImplemented",
    )
