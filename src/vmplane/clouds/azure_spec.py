"""Azure as the spec file sees it: parsed so an Azure file validates; provisioning refuses it until GA.

Imports only pydantic and `vmplane.envspec` (see clouds/specs.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vmplane.envspec.base import CertSource, Cloud, ExecMode
from vmplane.envspec.cloudspec import CloudSpec, IdPattern, ProviderBase
from vmplane.envspec.cloudspec import plain_pool_defaults as _plain


class AzureProvider(ProviderBase):
    """Parsed so an Azure file validates; provisioning refuses Azure until it is generally available."""

    cloud: Literal[Cloud.azure] = Field(description="Microsoft Azure (not provisionable yet).")
    region: str = Field(min_length=1, description="Azure region, e.g. westeurope.")

    @property
    def profile(self) -> None:
        return None


SPEC = CloudSpec(
    name="azure",
    label="Azure",
    provider=AzureProvider,
    exec_mode=ExecMode.AzureRunCmd,
    cert_source=CertSource.AzureKeyVault,
    secret_stores=(),
    network_id=IdPattern(r"\S+", "a virtual network id"),
    subnet_id=IdPattern(r"\S+", "a subnet id"),
    fill_pool=_plain({"instanceType": "Standard_B2s", "image": "ubuntu-24.04"}),
)
