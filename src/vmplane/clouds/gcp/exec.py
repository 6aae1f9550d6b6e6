"""The exec channel: a metadata mailbox answered through guest attributes (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import CommandResult, SessionHint
from vmplane.clouds.gcp.session import GcpClients

MAX_SCRIPT_BYTES = 48 * 1024


def run(
    gcp: GcpClients, instance_ids: list[str], commands: list[str], *, comment: str, timeout: float
) -> list[CommandResult]:
    raise NotImplementedError


def session_hint(gcp: GcpClients, vm_id: str) -> SessionHint:
    raise NotImplementedError
