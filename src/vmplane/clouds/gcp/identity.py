"""The environment's service account and its project roles (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_identity(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def delete_identity(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
