"""What a driver's parts return: plan lines, command results, leftovers, session hints (pure data)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Leftover:
    """A resource still tagged with a job id (what a clean teardown must leave none of)."""

    kind: str
    id: str


class CommandStatus(StrEnum):
    """A command's outcome in neutral words; each driver maps its channel's statuses onto these."""

    success = "Success"
    failed = "Failed"
    timed_out = "TimedOut"
    cancelled = "Cancelled"
    undeliverable = "Undeliverable"  # the channel could not reach the VM (agent down, no permission)


@dataclass(frozen=True)
class CommandResult:
    """One command's outcome on one VM through the exec channel."""

    instance_id: str
    status: CommandStatus
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status is CommandStatus.success and self.exit_code == 0


class Action(StrEnum):
    """What a plan does to one resource (Terraform's symbols)."""

    create = "+"
    update = "~"
    destroy = "-"
    recreate = "-/+"  # destroy, then create a replacement


@dataclass(frozen=True)
class PlannedResource:
    action: Action
    type: str
    name: str
    step: str
    detail: str = ""


@dataclass(frozen=True)
class SessionHint:
    argv: list[str]  # the command a person runs
    needs: str | None = None  # a program that must be on PATH for it (e.g. session-manager-plugin)
