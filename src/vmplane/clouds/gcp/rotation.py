"""Replacing outdated VMs (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def rotate_pool(gcp: GcpClients, ctx: Context, pool_name: str) -> list[str]:
    raise NotImplementedError
