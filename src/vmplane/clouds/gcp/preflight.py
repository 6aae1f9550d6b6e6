"""stepValidate's checks against the project (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp.session import GcpClients


def preflight(gcp: GcpClients, ctx: Context) -> None:
    raise NotImplementedError
