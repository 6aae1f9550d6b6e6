"""Where a job runs (a cloud account or the sandbox) and which driver serves it."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.models import Cloud, EnvSpec


class Target(BaseModel):
    """Recorded on the job so a resumed or recovered workflow talks to the same endpoint."""

    model_config = ConfigDict(frozen=True)

    cloud: Cloud
    region: str
    profile: str | None = None
    endpoint_url: str | None = None  # the sandbox's; None for the real cloud

    @property
    def sandbox(self) -> bool:
        return self.endpoint_url is not None

    @classmethod
    def for_spec(cls, spec: EnvSpec, sandbox_endpoint: str | None) -> Target:
        return cls(
            cloud=spec.provider.cloud,
            region=spec.provider.region,
            profile=None if sandbox_endpoint else spec.provider.profile,
            endpoint_url=sandbox_endpoint,
        )

    def describe(self) -> str:
        where = f"sandbox at {self.endpoint_url}" if self.sandbox else self.cloud.value
        return f"{where} ({self.region})"


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
