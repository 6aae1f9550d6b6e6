"""Pools: Fixed VMs and regional MIGs (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_vms(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def delete_vms(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
