"""Everything on the cluster still tagged with a job (a clean teardown leaves none)."""

from __future__ import annotations

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.proxmox.session import Pve


def leftovers(pve: Pve, ctx: Context) -> list[Leftover]:
    raise NotImplementedError
