"""Instance templates, versioned (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def ensure_templates(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError


def delete_templates(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
