"""What of a job remains in the project (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.gcp.session import GcpClients


def leftovers(gcp: GcpClients, ctx: Context) -> list[Leftover]:
    raise NotImplementedError
