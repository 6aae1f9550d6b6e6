"""The environment's PVE pool (one per environment): made in stepCreateNetwork, removed last."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def ensure_pool(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError


def delete_pool(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
