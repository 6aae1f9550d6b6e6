"""Every name the Proxmox driver gives an object, in one place: steps create with these, plans show
these, teardown and the leftover scan find by these.

PVE's own limits shape them: SDN zone and VNet ids are at most 8 characters `[a-z][a-z0-9]*`, cluster
firewall groups at most 18 `[A-Za-z][A-Za-z0-9_-]*`, pool ids `[A-Za-z0-9_.-]`, VM names DNS names. The
short ids are derived from the job id (unique per cluster), so a resumed step finds what a killed one
made; the tag set (tags + description) says whose it is.
"""

from __future__ import annotations

from vmplane.clouds.naming import digest, fit
from vmplane.clouds.tags import proxmox_tags
from vmplane.envspec.models import EnvSpec

MAX_VM_NAME = 63
DESCRIPTION_HEADER = "Managed by vmplane. Tags:"


def pool_id(spec: EnvSpec, job_id: str) -> str:
    """One PVE pool per environment: `vmplane-<env>-<6 hex of the job>`."""
    return f"vmplane-{spec.name}-{digest(job_id, 6)}"[:64]


def zone_id(job_id: str) -> str:
    return f"vz{digest(job_id, 6)}"


def vnet_id(job_id: str) -> str:
    return f"vn{digest(job_id, 6)}"


def security_group(job_id: str) -> str:
    return f"vmplane-{digest(job_id, 8)}"


def vm_name(spec: EnvSpec, pool: str, index: int) -> str:
    return fit(f"{spec.name}-{pool}-{index}", MAX_VM_NAME)


def iso_name(vmid: int) -> str:
    """The NoCloud ISO's file name on the storage (`<storage>:iso/<name>`)."""
    return f"vmplane-{vmid}-cidata.iso"


def tag_tokens(tags: dict[str, str]) -> list[str]:
    return proxmox_tags(tags)


def description(tags: dict[str, str], extra: str = "") -> str:
    """The full tag set, readable in the web UI's Notes, and parsed back by `tags_from_description`."""
    lines = [DESCRIPTION_HEADER] + [f"{k}={v}" for k, v in sorted(tags.items())]
    return "\n".join(lines + ([extra] if extra else []))


def tags_from_description(text: str | None) -> dict[str, str]:
    if not text or DESCRIPTION_HEADER not in text:
        return {}
    body = text.split(DESCRIPTION_HEADER, 1)[1]
    out = {}
    for line in body.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out
