"""What a cloud gives the driver contract suite (tests/contract/suite.py): one `Adapter` subclass per cloud.

The suite owns the flow (apply, kill -9 after a call, resume, compare, destroy, drift, repair); the adapter
owns everything that names the cloud: how its emulator starts, its example, how its resources are listed
and normalised, which tallied calls mutate, how drift is made out of band, and the call lists the clean
reference runs make (pytest parameters, so they are written out; the suite fails printing them to paste
when the code's calls change)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.helpers import Cli, write_env


@dataclass
class RepairEnv:
    """One applied environment a repair scenario drifts and repairs, case after case: a case needs a
    converged environment of the example, not a fresh one, so one apply per scenario serves all its kill
    points. `clean` is False while a case has drifted it and True once that case proved the repair."""

    cli: Cli
    env_file: Path
    name: str
    job_id: str
    emu: Any  # the adapter's emulator handle (a Sandbox, a fake cluster)
    clean: bool = True
    baseline: Any = None  # what the adapter's `check_repaired` compares with (a normalised snapshot, or None)
    extra: dict[str, Any] = field(default_factory=dict)

    def apply_args(self, flags: tuple[str, ...]) -> tuple[str, ...]:
        return ("apply", "-f", str(self.env_file), *flags, "--yes")

    def drift(self, expect: int) -> list[Any]:
        """`vmplane drift -o json`'s entries; the exit code must be `expect` (0 clean, 3 drifted)."""
        proc = self.cli.run("drift", self.name, "-o", "json")
        assert proc.returncode == expect, f"drift exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return list(json.loads(proc.stdout)["drift"])


class Adapter(ABC):
    """One cloud's side of the contract. Class attributes are the parameters the suite is generated from."""

    name: ClassVar[str]
    marks: ClassVar[tuple[pytest.MarkDecorator, ...]] = ()
    flags: ClassVar[tuple[str, ...]] = ("--sandbox",)  # where the environment runs (none: a real API to vmplane)
    # The crash sweep: the clean reference run's distinct mutating calls (clouds/faults.py hook names), the
    # later calls of a method that makes another resource (`name#N`, fixed because their steps run in order),
    # the destroy's, and the emulator gaps that keep a case from converging (`phase:op`, strict xfail).
    APPLY_OPS: ClassVar[list[str]]
    LATER_CALLS: ClassVar[list[str]] = []
    DESTROY_OPS: ClassVar[list[str]]
    XFAIL: ClassVar[dict[str, str]] = {}
    # The fault kinds the sweep's emulator must have injected during the reference run.
    FAULTS: ClassVar[tuple[str, ...]] = ()
    # The repair sweep: scenario -> the clean reference repair's kill points.
    REPAIR_OPS: ClassVar[dict[str, list[str]]]
    # The repair is resumed by `vmplane resume` (else by the same apply again).
    RESUME_REPAIR_WITH_RESUME: ClassVar[bool] = False
    # Each repair case checks `vmplane drift` finds the drift it made (else only the reference does).
    CHECK_FOUND_EACH_CASE: ClassVar[bool] = False

    # ---- the crash sweep -------------------------------------------------------------------------------

    @abstractmethod
    def case(self, op: str) -> str | None:
        """A tallied call's kill-point name when it mutates, else None."""

    @abstractmethod
    def sweep_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        """The emulator a sweep run (the reference, or one case) runs against."""

    @abstractmethod
    def cli(self, tmp: Path, emu: Any) -> Cli: ...

    def sweep_name(self, unique: str) -> str:
        """A sweep environment's name: `unique` where runs share the emulator (names must not collide)."""
        return unique

    @abstractmethod
    def write_env(self, tmp: Path, name: str, emu: Any) -> Path:
        """The sweep's example under `name`, aimed at `emu`."""

    @abstractmethod
    def snapshot(self, emu: Any, env_file: Path, job_id: str) -> dict[str, Any]:
        """Everything of the job in the cloud, normalised so two clean runs under other names are equal."""

    def remaining(self, snap: dict[str, Any]) -> dict[str, Any]:
        """What of the snapshot still exists (destroy must leave this empty)."""
        return {k: v for k, v in snap.items() if v}

    def check_reference(self, snap: dict[str, Any]) -> None:
        """Extra checks of the clean run's snapshot (e.g. one of each: an empty cloud never passes)."""
        return None

    def around_kill(self, emu: Any, apply_op: str | None) -> AbstractContextManager[None]:
        """Wraps one case's killed apply and destroy (e.g. to hold a task so the kill lands while it runs)."""
        return nullcontext()

    def fault_tally(self, emu: Any) -> dict[str, int]:
        return {}

    def writes_seen(self, emu: Any) -> list[str] | None:
        """Every mutating request the emulator has received, in order, when it keeps a log (else None)."""
        return None

    # ---- the repair sweep ------------------------------------------------------------------------------

    @abstractmethod
    def repair_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]: ...

    @abstractmethod
    def repair_env(self, scenario: str, emu: Any, tmp: Path, name: str) -> RepairEnv:
        """The scenario's example applied under `name` (converged, not drifted)."""

    @abstractmethod
    def make_drift(self, scenario: str, env: RepairEnv) -> None:
        """Drift the environment out of band, with the cloud's own client (never vmplane's session)."""

    def check_repaired(self, scenario: str, env: RepairEnv) -> None:
        """After a converged repair: nothing made twice, nothing left (beyond `vmplane drift` being clean)."""
        return None

    @abstractmethod
    def repair_ops(self, job: dict[str, Any]) -> list[str]:
        """The kill points of the repair operation the job record holds (its steps' tallies)."""


class SandboxAdapter(Adapter):
    """A cloud emulated by `vmplane sandbox` (tests.helpers.Sandbox): the crash sweep on the session's
    `sweep_sandbox` (tests/fixtures/faults/sweep.jsonc: killed runs resume through not-yet-visible ids and
    throttling, as on the real cloud), the repair sweep on the session's `sandbox`; examples/ files as they are."""

    EXAMPLE: ClassVar[str]  # the crash sweep's
    REPAIR_EXAMPLES: ClassVar[dict[str, str]]  # scenario -> example

    def sweep_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return nullcontext(request.getfixturevalue("sweep_sandbox"))

    def repair_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return nullcontext(request.getfixturevalue("sandbox"))

    def cli(self, tmp: Path, emu: Any) -> Cli:
        return Cli(home=tmp / "home", sandbox_port=emu.port, gcp_port=emu.gcp_port)

    def write_env(self, tmp: Path, name: str, emu: Any) -> Path:
        return write_env(tmp, name, example=self.EXAMPLE)

    def fault_tally(self, emu: Any) -> dict[str, int]:
        return dict(emu.fault_tally())

    def repair_env(self, scenario: str, emu: Any, tmp: Path, name: str) -> RepairEnv:
        cli = self.cli(tmp, emu)
        env_file = write_env(tmp, name, example=self.REPAIR_EXAMPLES[scenario])
        job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert job["status"] == "succeeded", job["error"]
        return RepairEnv(cli, env_file, name, str(job["id"]), emu)
