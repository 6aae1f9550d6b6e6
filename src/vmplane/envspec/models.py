"""The environment spec: one immutable model tree, the single source of truth for the file format.

Field names in the JSONC file are camelCase (aliases); Python attributes are snake_case. Every model
forbids unknown keys so a typo is an error with a did-you-mean, never a silently ignored setting.
The JSON Schema that editors use (`vmplane schema`) is generated from these models.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ModelWrapValidatorHandler, create_model, field_validator, model_validator

from vmplane.envspec import percloud
from vmplane.envspec.base import DNS_LABEL, DNS_LABEL_RE, CertSource, Cloud, ExecMode, SpecModel
from vmplane.envspec.cloudspec import CloudOptions, OptionSection
from vmplane.envspec.provider import Provider, ProviderBase, spec_for
from vmplane.envspec.schedule import Schedule
from vmplane.envspec.secrets import RuntimeValue, Secret

# Explicit: the names defined in base/provider/cloudspec are re-exported here.
__all__ = [
    "DNS_LABEL",
    "NETWORK_SYNONYMS",
    "SENTINEL_PATH",
    "Arch",
    "AsgPool",
    "Bootstrap",
    "BootstrapMode",
    "CertSource",
    "Cloud",
    "CloudOptions",
    "EnvSpec",
    "Exec",
    "ExecMode",
    "FixedPool",
    "HealthCheck",
    "LoadBalancer",
    "Network",
    "Pool",
    "PoolBase",
    "Provider",
    "ProviderBase",
    "Runtime",
    "RuntimeValue",
    "Secret",
    "SpecModel",
    "TerraformState",
    "spec_json",
]

_DNS_LABEL_RE = DNS_LABEL_RE
# Cloud-neutral keys accepted for the AWS-named ones, which stay the recorded (dumped) keys.
NETWORK_SYNONYMS = {"existingNetwork": "existingVpcId", "existingSubnets": "existingPrivateSubnetIds"}
SENTINEL_PATH = "/var/lib/vmplane/bootstrap-complete"

# Each section's per-cloud keys (`pools.<p>.proxmox`, `exec.gcp`, `loadBalancer.aws`) are fields built from the
# registered clouds' option models; mypy sees the neutral section, code reads them with `section.options(Kind)`.
if TYPE_CHECKING:

    class _PoolSection(OptionSection): ...

    class _ExecSection(OptionSection): ...

    class _LoadBalancerSection(OptionSection): ...

else:
    _PoolSection = create_model("_PoolSection", __base__=OptionSection, **percloud.option_fields("pool"))
    _ExecSection = create_model("_ExecSection", __base__=OptionSection, **percloud.option_fields("exec"))
    _LoadBalancerSection = create_model(
        "_LoadBalancerSection", __base__=OptionSection, **percloud.option_fields("loadBalancer")
    )


class BootstrapMode(StrEnum):
    nginx = "nginx"
    bare = "bare"


class Arch(StrEnum):
    amd64 = "amd64"
    arm64 = "arm64"


class Network(SpecModel):
    cidr: str = Field(
        default="10.40.0.0/16",
        description="CIDR of the new network (ignored when existingVpcId is set). /16 to /24.",
    )
    zones: int = Field(
        default=2,
        ge=2,
        le=6,
        description="How many zones to spread VMs (and, where zonal, subnets) over (at least 2).",
    )
    existing_vpc_id: str | None = Field(
        default=None,
        min_length=1,
        description="Use this network instead of creating one; vmplane never modifies or deletes it. AWS: a "
        "VPC id (vpc-...); GCP: a VPC network name or self-link; Proxmox: a bridge or SDN VNet (vmbr0). "
        "existingNetwork is the same setting under a cloud-neutral name.",
    )
    existing_private_subnet_ids: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Private subnets of the existing network for the VMs (required with existingVpcId except "
        "on Proxmox). AWS: subnet ids (subnet-...); GCP: subnetwork names. Also accepted as existingSubnets.",
    )
    ingress_ports: list[Annotated[int, Field(ge=1, le=65535, json_schema_extra={"not": {"const": 22}})]] = Field(
        default_factory=lambda: [80],
        description="TCP ports the VM security group opens, to sources inside the VPC only. Never 22.",
    )

    @model_validator(mode="before")
    @classmethod
    def _synonyms(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for neutral, key in NETWORK_SYNONYMS.items():
            if neutral in data:
                if key in data:
                    raise ValueError(f"give {neutral} or {key}, not both (they are the same setting)")
                data[key] = data.pop(neutral)
        return data

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.ip_network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"not a valid network CIDR: {e}") from None
        if net.version != 4 or not 16 <= net.prefixlen <= 24:
            raise ValueError("must be an IPv4 CIDR between /16 and /24")
        if not net.is_private:
            raise ValueError("must be a private range (10/8, 172.16/12 or 192.168/16)")
        return v

    @field_validator("ingress_ports")
    @classmethod
    def _no_ssh(cls, v: list[int]) -> list[int]:
        if 22 in v:
            raise ValueError("port 22 is never opened: use the exec channel (`vmplane exec`) instead of SSH")
        if len(set(v)) != len(v):
            raise ValueError("ports must be unique")
        return sorted(v)

    @property
    def existing_network(self) -> str | None:
        """The cloud-neutral name of existing_vpc_id (the per-cloud format is checked with the provider)."""
        return self.existing_vpc_id

    @property
    def existing_subnets(self) -> list[str]:
        return self.existing_private_subnet_ids


class PoolBase(_PoolSection):
    # instanceType and image defaults depend on the cloud: EnvSpec fills them in (envspec/percloud.py);
    # the field defaults are AWS's, for pools built on their own.
    instance_type: str = Field(
        default="t3.small",
        min_length=1,
        description="Instance (machine) type; default per cloud: aws t3.small, gcp e2-small. "
        "Proxmox: an optional label (default <cores>vcpu-<memoryMb>mb).",
    )
    image: str = Field(
        default="al2023",
        min_length=1,
        description=(
            "AWS: an image id (ami-...), an alias (al2023, ubuntu-24.04, debian-12) resolved through the "
            "cloud's public parameters, or ssm:/path/to/parameter; default al2023. GCP: an image or image "
            "family; default ubuntu-24.04 (Google's Debian images do not run cloud-init). Proxmox: a label, "
            "default the template."
        ),
    )
    arch: Arch = Field(default=Arch.amd64, description="CPU architecture; must match the instance type.")
    disk_gb: int = Field(default=20, ge=8, le=16384, description="Root volume size (encrypted).")
    schedule: Schedule | None = Field(
        default=None, description="When the pool runs (stopped outside these hours); default all the time."
    )


class FixedPool(PoolBase):
    mode: Literal["fixed"] = Field(description="N VMs with stable names <env>-<pool>-<index>.")
    size: int = Field(ge=1, le=100, description="Number of VMs.")


class AsgPool(PoolBase):
    mode: Literal["asg"] = Field(description="An auto-scaling group from the launch template.")
    min: int = Field(ge=0, le=1000)
    max: int = Field(ge=1, le=1000)
    desired: int = Field(ge=0, le=1000)
    pin_template_version: bool = Field(
        default=False,
        description="Launch from the template version current at apply time instead of $Latest; a new "
        "version then reaches the group only through `vmplane rotate`.",
    )
    target_cpu_percent: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Optional target-tracking policy: keep the group's average CPU near this percentage.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> AsgPool:
        if not self.min <= self.desired <= self.max:
            raise ValueError(f"need min <= desired <= max, got {self.min} <= {self.desired} <= {self.max}")
        return self


Pool = Annotated[FixedPool | AsgPool, Field(discriminator="mode")]


class Bootstrap(SpecModel):
    mode: BootstrapMode = Field(
        default=BootstrapMode.nginx,
        description=("nginx: Docker + NGINX on the nginx-on-zop-net bridge; bare: Docker and the network only."),
    )
    timeout_seconds: int = Field(
        default=900, ge=10, le=7200, description="How long stepCreateVMs waits for the sentinel file."
    )


class Exec(_ExecSection):
    # Left None when omitted (read through EnvSpec.exec_mode): filling it in would change the recorded
    # spec of every existing environment and show up as an identity change in the next diff.
    mode: ExecMode | None = Field(
        default=None,
        description="Exec channel, the cloud's own: aws SSM, gcp OSConfig, azure AzureRunCmd, proxmox "
        "QemuGuestAgent (the default).",
    )


class Runtime(SpecModel):
    env: dict[str, RuntimeValue] = Field(
        default_factory=dict,
        description='Environment variables for workloads: a plain value, or {"secret": "<ref>"} read by the VM.',
    )
    files: dict[str, RuntimeValue] = Field(
        default_factory=dict,
        description='Absolute path on the VM -> file content, or {"secret": "<ref>"} (written root-only, 0600).',
    )

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, RuntimeValue]) -> dict[str, RuntimeValue]:
        for k, val in v.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ValueError(f"{k!r} is not a valid environment variable name")
            if isinstance(val, str) and ("\n" in val or "\r" in val):
                raise ValueError(f"{k}: values are one line (the env file holds one KEY=value per line)")
        return v

    @field_validator("files")
    @classmethod
    def _abs_paths(cls, v: dict[str, RuntimeValue]) -> dict[str, RuntimeValue]:
        for k in v:
            if not k.startswith("/") or ".." in k.split("/"):
                raise ValueError(f"{k!r} must be an absolute path without '..'")
        return v

    def plain_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if isinstance(v, str)}

    def plain_files(self) -> dict[str, str]:
        return {k: v for k, v in self.files.items() if isinstance(v, str)}


class HealthCheck(SpecModel):
    path: str = Field(default="/healthz", pattern=r"^/")
    port: int = Field(default=80, ge=1, le=65535)
    healthy_threshold: int = Field(default=3, ge=2, le=10)
    unhealthy_threshold: int = Field(default=3, ge=2, le=10)
    interval_seconds: int = Field(default=15, ge=5, le=300)


class LoadBalancer(_LoadBalancerSection):
    """A TLS load balancer in the public subnets in front of the private VMs (HTTP redirects to HTTPS)."""

    domain: str = Field(
        min_length=3,
        max_length=253,
        pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$",
        description="DNS name the LB answers on (an alias record is written in the hosted zone).",
    )
    cert_source: CertSource = Field(
        default=CertSource.AWSACM,
        description="Where the TLS certificate comes from; the cloud's own: aws AWSACM (default there), gcp "
        "GCPManaged, azure AzureKeyVault.",
    )
    certificate_arn: str | None = Field(
        default=None,
        min_length=1,
        description="Use this existing certificate instead of requesting one (AWS: an ACM ARN, arn:...).",
    )
    target_port: int = Field(default=80, ge=1, le=65535, description="Port the VMs serve on (NGINX: 80).")
    health_check: HealthCheck = Field(default_factory=HealthCheck)


class TerraformState(SpecModel):
    """Where the generated OpenTofu/Terraform stack keeps its state (the direct pipeline ignores this)."""

    bucket: str = Field(
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="The state bucket: S3 on AWS (object vmplane/<org>/<name>/terraform.tfstate), Cloud Storage "
        "on Google Cloud (gcs backend prefix vmplane/<org>/<name>, object <prefix>/default.tfstate).",
    )
    region: str | None = Field(default=None, description="AWS only: the bucket's region (default: provider.region).")
    location: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9-]{2,40}$",
        description="Google Cloud only: the bucket's location when `vmplane tf state init` creates it, a region "
        "(us-central1), dual-region or multi-region (EU) (default: provider.region).",
    )


class EnvSpec(SpecModel):
    schema_: str | None = Field(default=None, alias="$schema", description="Path to the local JSON Schema.")
    name: str = Field(
        pattern=DNS_LABEL,
        description="Environment name: the identity. DNS-safe, 1-32 chars. Cannot change in place.",
    )
    org: str = Field(pattern=DNS_LABEL, description="Owning organisation id (the zop:orgId tag).")
    provider: Provider = Field(description="Where the environment runs; the shape follows provider.cloud.")
    network: Network = Field(default_factory=Network)
    pools: dict[str, Pool] = Field(
        min_length=1,
        description="VM pools by name (DNS-safe names).",
        json_schema_extra={"propertyNames": {"pattern": DNS_LABEL}},  # what `_pool_names` enforces
    )
    bootstrap: Bootstrap = Field(default_factory=Bootstrap)
    exec_: Exec = Field(default_factory=Exec, alias="exec")
    tag_prefix: str = Field(default="zop:", pattern=r"^[A-Za-z0-9_.:/=+@-]{1,32}$")
    tags: dict[str, str] = Field(default_factory=dict, description="Extra tags on every resource.")
    runtime: Runtime = Field(default_factory=Runtime)
    load_balancer: LoadBalancer | None = Field(default=None)
    state: TerraformState | None = Field(
        default=None, description="Remote state of the generated Terraform stack (`vmplane tf state init`)."
    )

    @model_validator(mode="wrap")
    @classmethod
    def _per_cloud(cls, data: Any, handler: ModelWrapValidatorHandler[EnvSpec]) -> EnvSpec:
        """Old settings moved and the cloud's defaults filled in before validation, its checks after."""
        if isinstance(data, EnvSpec):
            return handler(data)
        prepared = percloud.prepare(data)
        spec = handler(prepared.data)
        percloud.check(spec, prepared.foreign)
        percloud.remember(spec, prepared.moved)
        return spec

    @field_validator("pools")
    @classmethod
    def _pool_names(cls, v: dict[str, FixedPool | AsgPool]) -> dict[str, FixedPool | AsgPool]:
        for k in v:
            if not _DNS_LABEL_RE.match(k):
                raise ValueError(f"pool name {k!r} must be DNS-safe (lowercase letters, digits, '-')")
        return v

    @field_validator("tags")
    @classmethod
    def _tag_limits(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if k.lower().startswith("aws:"):
                raise ValueError(f"tag key {k!r}: the aws: prefix is reserved")
            if not 1 <= len(k) <= 128 or len(val) > 256:
                raise ValueError(f"tag {k!r}: keys are 1-128 chars, values at most 256")
        return v

    @property
    def exec_mode(self) -> ExecMode:
        if self.exec_.mode is not None:
            return self.exec_.mode
        cloud = spec_for(self.provider)
        if cloud is None:
            raise ValueError(f"no cloud {self.provider.cloud!r} is registered")
        return cloud.exec_mode

    @property
    def exec_interactive(self) -> bool:
        """Whether interactive sessions are allowed: true unless the cloud's exec options set `interactive` false
        (where a cloud offers the choice: they open a port)."""
        options = self.exec_.cloud_options(str(self.provider.cloud))
        return getattr(options, "interactive", None) is not False


def spec_json(spec: EnvSpec) -> dict[str, Any]:
    """The spec as the job records it (camelCase, defaults filled in, unset optionals left out)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True)
