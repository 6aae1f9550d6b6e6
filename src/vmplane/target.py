"""Where a job runs: a cloud account or a sandbox. Recorded on the job so a resumed or recovered
workflow talks to the same endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec


class Target(BaseModel):
    model_config = ConfigDict(frozen=True)

    cloud: Cloud
    region: str  # where the cloud is; on a cloud without regions, what logs print for it (Proxmox: its nodes)
    # Where the cloud places things, when that is not one region (Proxmox: the node names), for its driver.
    placement: tuple[str, ...] = ()
    profile: str | None = None  # AWS named profile
    project: str | None = None  # Google Cloud project
    endpoint_url: str | None = None  # the sandbox's; None for the real cloud
    api_endpoint: str | None = None  # Proxmox VE API (the cloud itself, not a sandbox)
    ca_file: str | None = None  # Proxmox: the CA that signed the API's certificate (None: the system store)
    verify_tls: bool = True  # Proxmox: False only for a lab the user said not to verify

    @property
    def sandbox(self) -> bool:
        return self.endpoint_url is not None

    @classmethod
    def for_spec(cls, spec: EnvSpec, sandbox_endpoint: str | None) -> Target:
        p = spec.provider
        # Each provider shape names what it adds (a profile, a project, an API endpoint).
        return cls(
            cloud=p.cloud, region=p.region, endpoint_url=sandbox_endpoint, **p.target_fields(bool(sandbox_endpoint))
        )

    def describe(self) -> str:
        where = f"sandbox at {self.endpoint_url}" if self.sandbox else self.api_endpoint or self.cloud.value
        return f"{where} ({self.region})"
