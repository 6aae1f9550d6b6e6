"""Detaching and deleting the load balancer (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def detach(gcp: GcpClients, ctx: Context, *, keep_vms: bool) -> None:
    raise NotImplementedError
