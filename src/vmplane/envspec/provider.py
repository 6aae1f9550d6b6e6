"""`provider`: where the environment runs, one shape per cloud, selected by `cloud`.

Every member answers `region` and `profile` so code written against the AWS-only provider (printing
`provider.region`, passing `provider.profile` to an AWS session) keeps type-checking on the union.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from vmplane.envspec.base import Cloud, SpecModel

GCP_PROJECT = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
GCP_REGION = r"^[a-z]+(-[a-z]+)+[0-9]+$"
_GCP_PROJECT_RE = re.compile(GCP_PROJECT)
_GCP_REGION_RE = re.compile(GCP_REGION)
# Proxmox node names are host names (one DNS label).
PVE_NODE = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"


class AwsProvider(SpecModel):
    cloud: Literal[Cloud.aws] = Field(description="Amazon Web Services.")
    region: str = Field(min_length=1, description="AWS region, e.g. us-east-1.")
    profile: str | None = Field(default=None, description="Named AWS credentials profile. Never read in sandbox mode.")


class GcpProvider(SpecModel):
    cloud: Literal[Cloud.gcp] = Field(description="Google Cloud.")
    # The patterns are what the validators below enforce, stated in the schema (JSON Schema and OpenAPI).
    project: str = Field(
        description="Google Cloud project id: 6-30 lowercase letters, digits or '-'.",
        json_schema_extra={"pattern": GCP_PROJECT},
    )
    region: str = Field(description="Google Cloud region, e.g. us-central1.", json_schema_extra={"pattern": GCP_REGION})

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not _GCP_PROJECT_RE.fullmatch(v):
            raise ValueError(
                "must be a Google Cloud project id: 6-30 lowercase letters, digits or '-', "
                "starting with a letter and not ending with '-'"
            )
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _GCP_REGION_RE.fullmatch(v):
            raise ValueError("must be a Google Cloud region like us-central1 (a region, not a zone like us-central1-a)")
        return v

    @property
    def profile(self) -> None:
        return None


class AzureProvider(SpecModel):
    """Parsed so an Azure file validates; provisioning refuses Azure until it is generally available."""

    cloud: Literal[Cloud.azure] = Field(description="Microsoft Azure (not provisionable yet).")
    region: str = Field(min_length=1, description="Azure region, e.g. westeurope.")

    @property
    def profile(self) -> None:
        return None


class ProxmoxProvider(SpecModel):
    cloud: Literal[Cloud.proxmox] = Field(description="A Proxmox VE cluster.")
    endpoint: str = Field(description="The Proxmox VE API, e.g. https://pve.example:8006.")
    node: Annotated[str, Field(pattern=PVE_NODE)] | None = Field(
        default=None, description="The node VMs are created on (give node or nodes)."
    )
    nodes: list[Annotated[str, Field(pattern=PVE_NODE)]] | None = Field(
        default=None, min_length=1, description="Nodes to spread VMs over (give node or nodes)."
    )
    ca_file: str | None = Field(
        default=None, min_length=1, description="PEM file of the CA that signed the API's TLS certificate."
    )
    verify_tls: bool = Field(default=True, description="Verify the API's TLS certificate (turn off only for a lab).")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        try:
            url = urlsplit(v)
            url.port  # noqa: B018 -- raises ValueError on a bad port
        except ValueError:
            url = None
        if url is None or url.scheme != "https" or not url.hostname or url.username or url.query or url.fragment:
            raise ValueError("must be an https URL of the Proxmox VE API, like https://pve.example:8006")
        return v

    @field_validator("nodes")
    @classmethod
    def _unique(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("node names must be unique")
        return v

    @model_validator(mode="after")
    def _one_placement(self) -> ProxmoxProvider:
        if (self.node is None) == (self.nodes is None):
            raise ValueError("give exactly one of node (one node) or nodes (a list)")
        if self.ca_file is not None and not self.verify_tls:
            raise ValueError("caFile is only used when verifyTls is true")
        return self

    @property
    def placement(self) -> list[str]:
        """The nodes VMs may be placed on, in the file's order."""
        return [self.node] if self.node is not None else list(self.nodes or [])

    @property
    def region(self) -> str:
        # Proxmox has no regions; the node list is the stable "where" that logs and targets print.
        return ",".join(self.placement)

    @property
    def profile(self) -> None:
        return None


Provider = Annotated[AwsProvider | GcpProvider | AzureProvider | ProxmoxProvider, Field(discriminator="cloud")]
