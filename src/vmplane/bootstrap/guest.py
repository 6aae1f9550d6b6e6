"""A cloud's guest side in the cloud-init user-data: the files it adds and how it wraps the boot commands.

The bootstrap is below the clouds in the layers, so it does not choose: a cloud's descriptor gives its
`GuestAddon` (clouds/<cloud>/descriptor.py), and render_user_data adds whatever it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class GuestAddon:
    # (path, content, permissions) of each file written before the bootstrap runs.
    files: Callable[[], list[tuple[str, str, str]]]
    # The bootstrap command -> every boot command (e.g. start an agent first, report readiness after).
    runcmd: Callable[[list[str]], list[list[str]]]
