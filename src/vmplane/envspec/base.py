"""What every spec model shares: the model config, the cloud names and the DNS label rule."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

DNS_LABEL = r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
DNS_LABEL_RE = re.compile(DNS_LABEL)


class SpecModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )


class Cloud(StrEnum):
    aws = "aws"
    gcp = "gcp"
    azure = "azure"
    proxmox = "proxmox"


class ExecMode(StrEnum):
    """The IAM-gated exec channel of each cloud (users know these names from the cloud consoles)."""

    SSM = "SSM"
    OSConfig = "OSConfig"
    AzureRunCmd = "AzureRunCmd"
    QemuGuestAgent = "QemuGuestAgent"  # Proxmox: `qm guest exec` through the API, no network path to the VM


class CertSource(StrEnum):
    AWSACM = "AWSACM"
    GCPManaged = "GCPManaged"
    AzureKeyVault = "AzureKeyVault"
