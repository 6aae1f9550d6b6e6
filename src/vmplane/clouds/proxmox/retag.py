"""Re-tag every object of the job with the spec's current tag set."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox.session import Pve


def retag(pve: Pve, ctx: Context) -> None:
    raise NotImplementedError
