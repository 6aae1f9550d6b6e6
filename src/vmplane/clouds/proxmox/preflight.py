"""stepValidate's checks against the cluster: nodes, templates, storage; creates nothing."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def preflight(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
