"""Firewall rules by network tag: VPC ingress and IAP's TCP 22 (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_firewall(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def delete_firewall(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
