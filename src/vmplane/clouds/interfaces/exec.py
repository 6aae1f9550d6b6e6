"""The exec part: commands on VMs through the cloud's IAM-gated channel, and the interactive session hint."""

from __future__ import annotations

import abc

from vmplane.clouds.records import CommandResult, SessionHint


class ExecChannel(abc.ABC):
    @abc.abstractmethod
    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]: ...

    @abc.abstractmethod
    def session_hint(self, vm_id: str) -> SessionHint:
        """How a person opens an interactive session on a VM."""
