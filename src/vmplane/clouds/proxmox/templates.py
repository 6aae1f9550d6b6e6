"""stepCreateLaunchTemplate on Proxmox: resolve each pool's template VM and version its VM config."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def ensure_templates(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError


def delete_templates(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
