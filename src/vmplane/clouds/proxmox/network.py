"""The VMs' network: an SDN simple zone, VNet and subnet with SNAT and DHCP, or an existing bridge."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def ensure_network(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError


def delete_network(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
