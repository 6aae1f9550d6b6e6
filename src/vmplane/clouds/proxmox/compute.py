"""Fixed pools' VMs: full clones of the template, cloud-init as a NoCloud ISO, started, ready through the agent."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def ensure_vms(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError


def delete_vms(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
