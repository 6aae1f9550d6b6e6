"""Proxmox VE as the spec file sees it: the provider shape, the pool options (template, size), defaults, limits.

Imports only pydantic and `vmplane.envspec`: `vmplane validate` loads it, and must start fast (no SDK).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import InitErrorDetails

from vmplane.envspec import cloudlimits
from vmplane.envspec.base import Cloud, ExecMode, SpecModel
from vmplane.envspec.cloudlimits import Rule, refusal
from vmplane.envspec.cloudspec import CloudOptions, CloudSpec, IdPattern, Moved, ProviderBase, Starter, has, is_int
from vmplane.envspec.secrets import SecretStore
from vmplane.envspec.tagforms import PROXMOX_TAG, proxmox_tags

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec, PoolBase

# Proxmox node names are host names (one DNS label).
PVE_NODE = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
PROXMOX_CORES, PROXMOX_MEMORY_MB = 2, 2048
_PVE_NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?")
_PVE_TAG_RE = re.compile(PROXMOX_TAG)


class ProxmoxProvider(ProviderBase):
    model_config = ConfigDict(
        **SpecModel.model_config, json_schema_extra={"oneOf": [{"required": ["node"]}, {"required": ["nodes"]}]}
    )

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

    def target_fields(self, sandbox: bool) -> dict[str, Any]:
        return {
            "placement": tuple(self.placement),
            "api_endpoint": self.endpoint,
            "ca_file": self.ca_file,
            "verify_tls": self.verify_tls,
        }


class ProxmoxPool(CloudOptions):
    """A Proxmox VM is a full clone of `template`, sized by cores and memory."""

    CLOUD: ClassVar[str] = "proxmox"

    template: int | str = Field(description="The template VM to clone, by VMID or name (required).")
    cores: int = Field(default=PROXMOX_CORES, ge=1, le=512, description="vCPU cores.")
    memory_mb: int = Field(default=PROXMOX_MEMORY_MB, ge=256, le=4_194_304, description="Memory in MiB.")

    @field_validator("template")
    @classmethod
    def _template(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 100 <= v <= 999_999_999:
            raise ValueError("a Proxmox VMID is between 100 and 999999999")
        if isinstance(v, str) and not _PVE_NAME_RE.fullmatch(v):
            raise ValueError("must be a VMID or a VM name (letters, digits, '.' and '-')")
        return v


def pool_options(pool: PoolBase) -> ProxmoxPool:
    """A validated Proxmox spec's pool options (always there: `template` is required on Proxmox)."""
    options = pool.options(ProxmoxPool)
    if options is None:
        raise ValueError("pools.<pool>.proxmox is required on proxmox")
    return options


def _fill_pool(pool: dict[str, Any]) -> dict[str, Any]:
    out = dict(pool)
    given = out.get("proxmox")
    own = dict(given) if isinstance(given, dict) else {}
    own.setdefault("cores", PROXMOX_CORES)
    if not has(own, "memoryMb"):
        own["memoryMb"] = PROXMOX_MEMORY_MB
    if given is None or isinstance(given, dict):
        out["proxmox"] = own  # a missing template is then reported at pools.<pool>.proxmox
    # image and instanceType are labels derived from the clone's source and size, so callers that print
    # or key on them keep working.
    template = own.get("template")
    if not has(out, "image") and isinstance(template, int | str) and not isinstance(template, bool):
        out["image"] = str(template)
    cores, memory = own.get("cores"), own.get("memoryMb", own.get("memory_mb"))
    if not has(out, "instanceType") and is_int(cores) and is_int(memory):
        out["instanceType"] = f"{cores}vcpu-{memory}mb"
    return out


PVE_TAG = Rule(
    "Proxmox VE",
    "400 value does not match the regex pattern (format pve-tag)",
    # PVE_TAG_RE there: [a-z0-9_][a-z0-9_\-\+\.]* (case-insensitive), the format of a VM's `tags`.
    "https://git.proxmox.com/?p=pve-common.git;a=blob;f=src/PVE/JSONSchema.pm",
)
RULES = (PVE_TAG,)


def tag_token_ok(token: str) -> bool:
    return _PVE_TAG_RE.fullmatch(token) is not None


def _tags(spec: EnvSpec) -> list[InitErrorDetails]:
    """Each tag pair becomes one PVE tag token (proxmox_tags): PVE refuses a token not `pve-tag`."""
    out: list[InitErrorDetails] = []
    prefix_reported = False
    for key, value in cloudlimits.logical_tags(spec).items():
        if key == "Name":
            continue  # the VM's name, not a tag
        (token,) = proxmox_tags({key: value}) or [""]
        if tag_token_ok(token):
            continue
        msg = f"becomes the Proxmox tag {token!r}, which PVE refuses (it must start with a-z, 0-9 or _)"
        if key in spec.tags:
            out.append(refusal(("tags", key), value, msg, PVE_TAG))
        elif not prefix_reported:  # one issue for the prefix, not one per key vmplane derives from it
            prefix_reported = True
            out.append(refusal(("tagPrefix",), spec.tag_prefix, f"{key!r} {msg}", PVE_TAG))
    return out


SPEC = CloudSpec(
    name="proxmox",
    label="Proxmox VE",
    provider=ProxmoxProvider,
    exec_mode=ExecMode.QemuGuestAgent,
    cert_source=None,  # Proxmox VE has no managed load balancer or certificate service
    # No secret store a VM reads with its own identity: secrets come from the operator's environment at push
    # time. `env:` stays off the clouds: SSM and OS Config keep the commands they ran.
    secret_stores=(SecretStore.env,),
    network_id=IdPattern(r"[A-Za-z][A-Za-z0-9_-]{0,14}", "a bridge or SDN VNet name (e.g. vmbr0)"),
    subnet_id=None,  # VMs attach to the bridge itself
    fill_pool=_fill_pool,
    pool_options=ProxmoxPool,
    moved=(Moved("pool", "template"), Moved("pool", "cores"), Moved("pool", "memoryMb")),
    checks=(_tags,),
    starter=Starter(
        provider="""    "cloud": "proxmox",
    "endpoint": "https://pve.example:8006", // your Proxmox VE API
    "node": "pve1", // or "nodes": ["pve1", "pve2"]
    // "caFile": "/etc/vmplane/pve-ca.pem", // the CA of the API's certificate""",
        network="VMs on a private network; port 22 is never opened.",
        machine="""      "proxmox": {
        "template": "debian-12-cloud", // the template VM to clone (name or VMID); init-node makes this one
        "cores": 2,
        "memoryMb": 2048,
      },""",
        secrets=("env:DB_PASSWORD", "env:APP_API_KEY"),
    ),
)
