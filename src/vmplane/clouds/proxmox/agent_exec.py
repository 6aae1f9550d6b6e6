"""The exec channel on Proxmox: the QEMU guest agent through the API (`agent/exec`, `exec-status`,
`file-read`), gated by PVE permissions, with no network path to the VM."""

from __future__ import annotations

from vmplane.clouds.base import CommandResult, SessionHint
from vmplane.clouds.proxmox.session import Pve

MAX_SCRIPT_BYTES = 48 * 1024


def run(pve: Pve, instance_ids: list[str], commands: list[str], *, timeout: float) -> list[CommandResult]:
    raise NotImplementedError


def session_hint(pve: Pve, vm_id: str) -> SessionHint:
    raise NotImplementedError
