"""Stop and start a pool's VMs (vmplane stop/start)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def stop_pool(pve: Pve, ctx: Context, pool_name: str) -> None:
    raise NotImplementedError


def start_pool(pve: Pve, ctx: Context, pool_name: str) -> None:
    raise NotImplementedError
