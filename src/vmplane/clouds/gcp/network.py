"""Network: custom-mode VPC, one private subnetwork, Cloud Router + NAT (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_network(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def delete_network(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
