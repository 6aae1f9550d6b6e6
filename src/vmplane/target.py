"""Where a job runs: a cloud account or a sandbox. Recorded on the job so a resumed or recovered
workflow talks to the same endpoint."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from vmplane.envspec.models import Cloud, EnvSpec


class Target(BaseModel):
    model_config = ConfigDict(frozen=True)

    cloud: Cloud
    region: str
    profile: str | None = None  # AWS named profile
    project: str | None = None  # Google Cloud project
    endpoint_url: str | None = None  # the sandbox's (or a Proxmox API endpoint); None for the public cloud

    @property
    def sandbox(self) -> bool:
        return self.endpoint_url is not None

    @classmethod
    def for_spec(cls, spec: EnvSpec, sandbox_endpoint: str | None) -> Target:
        p = spec.provider
        return cls(
            cloud=p.cloud,
            region=p.region,
            profile=None if sandbox_endpoint else getattr(p, "profile", None),
            project=getattr(p, "project", None),
            endpoint_url=sandbox_endpoint,
        )

    def describe(self) -> str:
        where = f"sandbox at {self.endpoint_url}" if self.sandbox else self.cloud.value
        return f"{where} ({self.region})"
