"""Drift at the driver boundary, substituted: the AWS driver's `drift` and `repair_drift` answer from a
recorded list of `Drift` objects, for the tests of what sits above the driver (the API, the job records,
the repair operation's run, the dashboard, the gauge). What each cloud's driver finds and repairs is
tested in the clouds' own tests (tests/integration/test_<cloud>_drift.py): here nothing but those two
methods (and the capability flag that says they exist) is replaced."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

import pytest

from vmplane.clouds.base import Context
from vmplane.clouds.drift import EXTRA_REPAIR, Drift, DriftChange, FieldDrift
from vmplane.clouds.errors import CloudError

OPEN_22 = {"protocol": "tcp", "from": 22, "to": 22, "cidr": "0.0.0.0/0"}
HTTP = {"protocol": "tcp", "from": 80, "to": 80, "cidr": "10.42.0.0/16"}


@dataclass
class RecordedDrift:
    """The cloud as the substituted driver reports it. `drift`: what the next read finds; `error`: raised by
    every read instead while set. A repair fixes what is repairable (the reported-only drift stays, as the
    real drivers leave the user's resources alone) and, while `hold` is set, waits in stepRepairDrift for
    `release` (so a test can look at a job in the middle of its repair)."""

    drift: list[Drift] = field(default_factory=list)
    error: CloudError | None = None
    reads: list[str] = field(default_factory=list)  # the job id of each read
    repairs: list[str] = field(default_factory=list)  # the job id of each stepRepairDrift
    hold: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from vmplane.clouds.aws.driver import AwsDriver
        from vmplane.clouds.aws.parts import AwsInventory

        monkeypatch.setattr(AwsDriver, "capabilities", dataclasses.replace(AwsDriver.capabilities, drift=True))
        # Bound methods of this object: the inventory part is not passed to them.
        monkeypatch.setattr(AwsInventory, "drift", self.read)
        monkeypatch.setattr(AwsInventory, "repair_drift", self.repair)

    def read(self, ctx: Context) -> list[Drift]:
        self.reads.append(ctx.job_id)
        if self.error is not None:
            raise self.error
        return list(self.drift)

    def repair(self, ctx: Context) -> None:
        self.repairs.append(ctx.job_id)
        if self.hold:
            self.entered.set()
            assert self.release.wait(300), "the test never released the repair"
        self.drift = [d for d in self.drift if not d.repairable]


def recorded(vm_name: str, vm_id: str, group_id: str) -> list[Drift]:
    """One of each change on a provisioned examples/fixed.jsonc (its first VM's name and id, its VMs'
    security group), and the user's own group, reported only."""
    return [
        Drift(
            f"aws_instance.{vm_name}", "aws_instance", vm_id, DriftChange.missing, (), "created again under its name"
        ),
        Drift(
            "aws_security_group.vms",
            "aws_security_group",
            group_id,
            DriftChange.changed,
            (FieldDrift("ingress", [HTTP], [OPEN_22, HTTP]), FieldDrift("tags.zop:env", "fixed", None)),
            "set back to what the file says",
        ),
        Drift("aws_instance.i-0stray", "aws_instance", "i-0stray", DriftChange.extra, (), EXTRA_REPAIR),
        Drift(
            "aws_security_group.default",
            "aws_security_group",
            "sg-0user",
            DriftChange.changed,
            (FieldDrift("ingress", [], [OPEN_22]),),
            "reported only: it is not vmplane's",
            repairable=False,
        ),
    ]
