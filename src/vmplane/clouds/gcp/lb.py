"""The global external Application Load Balancer chain (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_frontend(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def ensure_backend(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def ensure_listeners(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def ensure_dns_record(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
