"""What differs per cloud: defaults filled in before validation, and the checks that need the cloud.

Defaults are written into the input (not computed on read) so attributes stay plain `str` and the
recorded spec shows the value used. The checks run after the models validated (they need the whole
spec) and report at the field's own path, e.g. `loadBalancer.certSource`, like any field error.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from vmplane.envspec import cloudlimits
from vmplane.envspec.base import CertSource, Cloud, ExecMode
from vmplane.envspec.secrets import STORE_NAMES, Secret, SecretStore, plain_secret_warnings

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

DEFAULT_EXEC_MODE: dict[Cloud, ExecMode] = {
    Cloud.aws: ExecMode.SSM,
    Cloud.gcp: ExecMode.OSConfig,
    Cloud.azure: ExecMode.AzureRunCmd,
    Cloud.proxmox: ExecMode.QemuGuestAgent,
}
# Proxmox VE has no managed load balancer or certificate service.
CERT_SOURCE: dict[Cloud, CertSource] = {
    Cloud.aws: CertSource.AWSACM,
    Cloud.gcp: CertSource.GCPManaged,
    Cloud.azure: CertSource.AzureKeyVault,
}
POOL_DEFAULTS: dict[Cloud, dict[str, str]] = {
    Cloud.aws: {"instanceType": "t3.small", "image": "al2023"},
    # Google's Debian images do not run cloud-init (the bootstrap's carrier); its Ubuntu images do.
    Cloud.gcp: {"instanceType": "e2-small", "image": "ubuntu-24.04"},
    Cloud.azure: {"instanceType": "Standard_B2s", "image": "ubuntu-24.04"},
}
# The secret stores a VM of each cloud reads with its own identity; Proxmox VE has none, so its secrets come
# from the operator's environment at push time. `env:` stays off the clouds: SSM and OS Config keep the
# commands they ran, so a value sent inside one would be stored.
SECRET_STORES: dict[Cloud, tuple[SecretStore, ...]] = {
    Cloud.aws: (SecretStore.aws_sm, SecretStore.aws_ssm),
    Cloud.gcp: (SecretStore.gcp_sm,),
    Cloud.azure: (),
    Cloud.proxmox: (SecretStore.env,),
}
PROXMOX_CORES, PROXMOX_MEMORY_MB = 2, 2048
PROXMOX_ONLY = ("template", "cores", "memoryMb")

_GCP_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
_GCP_PREFIX = r"(https://www\.googleapis\.com/compute/v1/)?projects/[a-z][-a-z0-9]{4,28}[a-z0-9]"
# (pattern, what it is) for existingVpcId / existingPrivateSubnetIds entries; None: not available there.
_NETWORK_ID: dict[Cloud, tuple[str, str]] = {
    Cloud.aws: (r"vpc-[0-9a-f]+", "a VPC id (vpc-...)"),
    Cloud.gcp: (rf"{_GCP_NAME}|{_GCP_PREFIX}/global/networks/{_GCP_NAME}", "a VPC network name or self-link"),
    Cloud.azure: (r"\S+", "a virtual network id"),
    Cloud.proxmox: (r"[A-Za-z][A-Za-z0-9_-]{0,14}", "a bridge or SDN VNet name (e.g. vmbr0)"),
}
_SUBNET_ID: dict[Cloud, tuple[str, str] | None] = {
    Cloud.aws: (r"subnet-[0-9a-f]+", "a subnet id (subnet-...)"),
    Cloud.gcp: (rf"{_GCP_NAME}|{_GCP_PREFIX}/regions/[a-z0-9-]+/subnetworks/{_GCP_NAME}", "a subnetwork name"),
    Cloud.azure: (r"\S+", "a subnet id"),
    Cloud.proxmox: None,  # VMs attach to the bridge itself
}


def cloud_of(provider: Any) -> Cloud | None:
    """The cloud a raw `provider` value names, or None (then the provider's own error is reported)."""
    value = provider.get("cloud") if isinstance(provider, dict) else getattr(provider, "cloud", None)
    return Cloud(value) if isinstance(value, str) and value in Cloud.__members__.values() else None


def fill_defaults(data: Any) -> Any:
    """The raw spec with per-cloud defaults for the fields the file leaves out."""
    if not isinstance(data, dict) or (cloud := cloud_of(data.get("provider"))) is None:
        return data
    data = dict(data)
    if isinstance(pools := data.get("pools"), dict):
        data["pools"] = {name: _pool_defaults(cloud, pool) for name, pool in pools.items()}
    for key in ("loadBalancer", "load_balancer"):
        lb = data.get(key)
        if isinstance(lb, dict) and not _has(lb, "certSource", "cert_source") and cloud in CERT_SOURCE:
            data[key] = {**lb, "certSource": CERT_SOURCE[cloud]}
    return data


def _pool_defaults(cloud: Cloud, pool: Any) -> Any:
    if not isinstance(pool, dict):
        return pool
    if cloud is not Cloud.proxmox:
        return {**{k: v for k, v in POOL_DEFAULTS[cloud].items() if not _has(pool, k, _snake(k))}, **pool}
    out = dict(pool)
    out.setdefault("cores", PROXMOX_CORES)
    if not _has(out, "memoryMb", "memory_mb"):
        out["memoryMb"] = PROXMOX_MEMORY_MB
    # A Proxmox VM is a clone of `template` sized by cores/memory: image and instanceType are labels
    # derived from those, so callers that print or key on them keep working.
    template = out.get("template")
    if not _has(out, "image", "image") and isinstance(template, int | str) and not isinstance(template, bool):
        out["image"] = str(template)
    cores, memory = out.get("cores"), out.get("memoryMb", out.get("memory_mb"))
    if not _has(out, "instanceType", "instance_type") and _is_int(cores) and _is_int(memory):
        out["instanceType"] = f"{cores}vcpu-{memory}mb"
    return out


def check(spec: EnvSpec) -> None:
    """Raise a ValidationError listing every setting that does not belong to the spec's cloud."""
    errors = [
        *_exec(spec),
        *_network(spec),
        *_pools(spec),
        *_load_balancer(spec),
        *_secrets(spec),
        *cloudlimits.check(spec),
    ]
    if errors:
        raise ValidationError.from_exception_data("EnvSpec", errors)


def _error(loc: tuple[str | int, ...], value: Any, message: str) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("cloud_mismatch", message), loc=loc, input=value)


def _missing(loc: tuple[str | int, ...], parent: Any) -> InitErrorDetails:
    return InitErrorDetails(type="missing", loc=loc, input=parent)


def _exec(spec: EnvSpec) -> list[InitErrorDetails]:
    cloud, mode = spec.provider.cloud, spec.exec_.mode
    if spec.exec_.interactive is not None and cloud is not Cloud.gcp:
        # Only GCP's interactive channel needs an inbound port (22 from IAP); elsewhere it is not a choice.
        return [_error(("exec", "interactive"), spec.exec_.interactive, f"a GCP setting; {cloud} has no such choice")]
    if mode is None or mode is DEFAULT_EXEC_MODE[cloud]:
        return []
    owner = next(c for c, m in DEFAULT_EXEC_MODE.items() if m is mode)
    return [
        _error(
            ("exec", "mode"),
            mode.value,
            f"{mode.value} is the {owner} exec channel; {cloud} uses {DEFAULT_EXEC_MODE[cloud].value}",
        )
    ]


def _network(spec: EnvSpec) -> list[InitErrorDetails]:
    cloud, net = spec.provider.cloud, spec.network
    out: list[InitErrorDetails] = []
    pattern, what = _NETWORK_ID[cloud]
    if net.existing_vpc_id is not None and not re.fullmatch(pattern, net.existing_vpc_id):
        out.append(_error(("network", "existingVpcId"), net.existing_vpc_id, f"must be {what} on {cloud}"))
    subnet = _SUBNET_ID[cloud]
    if subnet is None:
        if net.existing_private_subnet_ids:
            msg = f"not used on {cloud}: VMs attach to existingNetwork directly"
            out.append(_error(("network", "existingPrivateSubnetIds"), net.existing_private_subnet_ids, msg))
        return out
    for i, sid in enumerate(net.existing_private_subnet_ids):
        if not re.fullmatch(subnet[0], sid):
            out.append(_error(("network", "existingPrivateSubnetIds", i), sid, f"must be {subnet[1]} on {cloud}"))
    if net.existing_vpc_id and not net.existing_private_subnet_ids:
        out.append(_error(("network",), None, "existingPrivateSubnetIds is required when existingVpcId is set"))
    if net.existing_private_subnet_ids and not net.existing_vpc_id:
        out.append(_error(("network",), None, "existingPrivateSubnetIds needs existingVpcId"))
    return out


def _pools(spec: EnvSpec) -> list[InitErrorDetails]:
    cloud = spec.provider.cloud
    out: list[InitErrorDetails] = []
    for name, pool in spec.pools.items():
        if cloud is Cloud.proxmox:
            if pool.template is None:
                out.append(_missing(("pools", name, "template"), None))
            continue
        given = {"template": pool.template, "cores": pool.cores, "memoryMb": pool.memory_mb}
        for key, value in given.items():
            if value is not None:
                msg = f"only for provider.cloud proxmox; on {cloud} size VMs with instanceType"
                out.append(_error(("pools", name, key), value, msg))
    return out


def _load_balancer(spec: EnvSpec) -> list[InitErrorDetails]:
    cloud, lb = spec.provider.cloud, spec.load_balancer
    if lb is None:
        return []
    if cloud not in CERT_SOURCE:
        return [_error(("loadBalancer",), None, f"{cloud} has no managed load balancer; leave loadBalancer out")]
    out: list[InitErrorDetails] = []
    if lb.cert_source is not CERT_SOURCE[cloud]:
        msg = f"{lb.cert_source.value} is not available on {cloud}; use {CERT_SOURCE[cloud].value}"
        out.append(_error(("loadBalancer", "certSource"), lb.cert_source.value, msg))
    if cloud is Cloud.aws and lb.certificate_arn is not None and not lb.certificate_arn.startswith("arn:"):
        out.append(_error(("loadBalancer", "certificateArn"), lb.certificate_arn, "must be an ACM ARN (arn:...)"))
    if cloud is not Cloud.aws and lb.hosted_zone_id is not None:
        hint = "; use dnsZone (a Cloud DNS managed zone)" if cloud is Cloud.gcp else ""
        out.append(_error(("loadBalancer", "hostedZoneId"), lb.hosted_zone_id, f"Route53 (aws) only{hint}"))
    if cloud is not Cloud.gcp and lb.dns_zone is not None:
        hint = "; use hostedZoneId (Route53)" if cloud is Cloud.aws else ""
        out.append(_error(("loadBalancer", "dnsZone"), lb.dns_zone, f"Cloud DNS (gcp) only{hint}"))
    return out


def _secrets(spec: EnvSpec) -> list[InitErrorDetails]:
    cloud = spec.provider.cloud
    allowed = SECRET_STORES[cloud]
    use = " or ".join(f"{s.value}: ({STORE_NAMES[s]})" for s in allowed) or "no secret store: plain values only"
    out: list[InitErrorDetails] = []
    for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files)):
        for key, value in values.items():
            if isinstance(value, Secret) and value.ref.store not in allowed:
                msg = f"{value.ref.store.value}: is not a secret store on {cloud}; use {use}"
                out.append(_error(("runtime", kind, key, "secret"), value.secret, msg))
    return out


def secret_warnings(spec: EnvSpec) -> list[str]:
    """validate's warnings for plain values named like secrets, each pointing at this cloud's store."""
    stores = SECRET_STORES[spec.provider.cloud]
    return plain_secret_warnings(spec, stores[0] if stores else None)


def _has(d: dict[str, Any], alias: str, name: str) -> bool:
    return alias in d or name in d


def _snake(alias: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), alias)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
