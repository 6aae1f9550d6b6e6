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
    """The shipped clouds are members; a plugin's cloud becomes a value of the enum through `extend`, so
    every `Cloud`-typed field (the job's `Target`, a descriptor) holds it, while iterating the enum still
    lists the shipped ones only."""

    aws = "aws"
    gcp = "gcp"
    azure = "azure"
    proxmox = "proxmox"

    @classmethod
    def extend(cls, name: str) -> Cloud:
        """The value for a cloud outside this list (a plugin's), made once: `Cloud(name)` finds it after."""
        known = cls._value2member_map_.get(name)
        if isinstance(known, Cloud):
            return known
        if not DNS_LABEL_RE.match(name):
            raise ValueError(f"a cloud's name must be a DNS label, not {name!r}")
        member = str.__new__(cls, name)
        member._name_, member._value_ = name, name
        cls._value2member_map_[name] = member
        return member

    @classmethod
    def _missing_(cls, value: object) -> Cloud | None:
        # A job recorded on a plugin's cloud names it before anything else looked a cloud up: load the
        # plugins (which `extend` the enum), then look again. Imported by name because envspec sits below
        # vmplane.clouds (the layers contract); the loader imports only the configured plugins.
        import importlib

        importlib.import_module("vmplane.clouds.plugins").load_plugins()
        found = cls._value2member_map_.get(value) if isinstance(value, str) else None
        return found if isinstance(found, Cloud) else None


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
