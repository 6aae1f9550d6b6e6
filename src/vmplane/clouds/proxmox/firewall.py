"""The cluster firewall security group that opens ingressPorts from the subnet only."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def ensure_security_group(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError


def delete_security_group(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
