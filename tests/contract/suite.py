"""The driver contract: one suite, run for each cloud's driver against its emulator through the real CLI.
A cloud joins with a subclass naming its adapter (tests/contract/adapter.py), in tests/contract/test_clouds.py.

- A re-run is idempotent: applying the converged file again runs no step, writes nothing (the emulator's
  request log, where it keeps one) and leaves the cloud as it was (the snapshot).
- A crash converges: `vmplane apply` killed -9 right after each distinct mutating call of a clean run
  (the hook of clouds/faults.py), then run again, leaves what a clean apply leaves (the adapter's
  normalised snapshot); the same for `vmplane destroy`, which must end `deleted` with nothing left. Each case
  kills one apply and then one destroy of the environment that apply converged to (tests/contract/sweep.py).
- Destroy leaves nothing: the reference run's destroy and every case's.
- Drift is found and repaired: each scenario's out-of-band drift makes `vmplane drift` exit 3; the repairing
  apply is killed -9 right after each distinct mutating call of a clean repair, and resumed it converges:
  `vmplane drift` clean, nothing made twice (the adapter's checks).

The call lists are the clean reference runs' own (the per-step API-call tally the job records); they are
pytest parameters (xdist spreads the cases), so each adapter writes them out and the `covers` tests fail,
printing the lists to paste, when the code's calls drift from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.contract.adapter import Adapter, RepairEnv
from tests.contract.sweep import Reference, assert_cases, differences, killed_apply_then_killed_destroy, paired_params
from tests.helpers import module_env_name
from tests.integration.test_crash_resume import kill_after


class DriverContract:
    """The suite; subclasses set `adapter` (and `pytestmark`). Fixtures are class-scoped: one reference run
    and one repair environment per cloud per worker."""

    adapter: ClassVar[Adapter]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        a = self.adapter
        if "apply_op" in metafunc.fixturenames:
            ops = paired_params(a.APPLY_OPS + a.LATER_CALLS, a.DESTROY_OPS, a.XFAIL)
            metafunc.parametrize(("index", "apply_op", "destroy_op"), ops)
        if "repair_op" in metafunc.fixturenames:
            cases = [pytest.param(s, op, id=f"{s}:{op}") for s, ops in a.REPAIR_OPS.items() for op in ops]
            metafunc.parametrize(("scenario", "repair_op"), cases)

    # ---- fixtures ----------------------------------------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def reference(cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
        """One clean apply, a re-run, and a destroy: the snapshot every resumed apply must equal, and the
        API-call tallies the kill-point lists are checked against."""
        a = cls.adapter
        tmp = tmp_path_factory.mktemp(f"{a.name}-sweep-ref")
        with a.sweep_emulator(request, tmp) as emu:
            cli = a.cli(tmp, emu)
            env_file = a.write_env(tmp, a.sweep_name(module_env_name(tmp, f"{a.name}-ref")), emu)
            args = ("-f", str(env_file), *a.flags, "--yes")
            applied = cli.json("apply", *args)
            assert applied["status"] == "succeeded", applied["error"]
            snap = a.snapshot(emu, env_file, applied["id"])
            a.check_reference(snap)
            seen = a.writes_seen(emu)
            again = cli.json("apply", *args)
            writes = None if seen is None else (a.writes_seen(emu) or [])[len(seen) :]
            assert again["status"] == "succeeded", again["error"]
            after = a.snapshot(emu, env_file, again["id"])
            assert after == snap, "the re-run changed the cloud:\n" + "\n".join(differences(after, snap)[:40])
            destroyed = cli.json("destroy", *args)
            assert destroyed["status"] == "deleted", destroyed["error"]
            left = a.remaining(a.snapshot(emu, env_file, applied["id"]))
            assert not left, f"the clean destroy left {left}"
            met = a.fault_tally(emu)
            for fault in a.FAULTS:
                assert met.get(fault, 0) > 0, f"the sweep's profile never injected {fault}: {dict(met)}"
            yield Reference(applied, snap, destroyed, again, writes)

    @pytest.fixture
    def sweep_emu(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
        with self.adapter.sweep_emulator(request, tmp_path) as emu:
            yield emu

    @pytest.fixture(scope="class")
    @classmethod
    def repair_emu(cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        with cls.adapter.repair_emulator(request, tmp_path_factory.mktemp(f"{cls.adapter.name}-repair-emu")) as emu:
            yield emu

    @pytest.fixture(scope="class")
    @classmethod
    def repair_reference(cls, repair_emu: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        """One clean repair per scenario: the calls the kill points are checked against. Its environment,
        clean again after that repair, is what every case of the scenario drifts and repairs in turn."""
        a = cls.adapter
        out: dict[str, Any] = {}
        for scenario in a.REPAIR_OPS:
            tmp = tmp_path_factory.mktemp(f"{a.name}-repair-{scenario}")
            env = a.repair_env(scenario, repair_emu, tmp, module_env_name(tmp, f"{a.name}-rs-{scenario}"))
            assert env.drift(0) == []
            a.make_drift(scenario, env)
            assert env.drift(3), "the drift was not found"
            repaired = env.cli.json("apply", "-f", str(env.env_file), *a.flags, "--yes")
            operation = repaired["config"]["operation"]
            assert (operation["kind"], operation["status"]) == ("repair", "succeeded"), operation.get("error")
            assert env.drift(0) == []
            a.check_repaired(scenario, env)
            out[scenario] = a.repair_ops(repaired)
            out[f"{scenario}:env"] = env
        return out

    @pytest.fixture
    def repair_env(self, repair_reference: dict[str, Any], repair_emu: Any, tmp_path: Path, scenario: str) -> RepairEnv:
        """The scenario's shared environment when the last case left it converged, else (a case failed half-way)
        a fresh one, so one failure does not fail the cases after it."""
        shared: RepairEnv = repair_reference[f"{scenario}:env"]
        if shared.clean:
            return shared
        name = f"{self.adapter.name}-rs-{scenario}-{tmp_path.name[-20:]}".replace("_", "-")
        fresh = self.adapter.repair_env(scenario, repair_emu, tmp_path, name)
        repair_reference[f"{scenario}:env"] = fresh
        return fresh

    # ---- the contract ------------------------------------------------------------------------------------

    def test_the_sweep_covers_every_mutating_call(self, reference: Reference) -> None:
        a = self.adapter
        assert_cases(reference.applied, reference.destroyed, a.case, a.APPLY_OPS, a.DESTROY_OPS)

    def test_a_rerun_is_idempotent(self, reference: Reference) -> None:
        """The converged file applied again runs no step and records no operation (every cloud call of a step is
        tallied in the job, so none was made there), the cloud is unchanged (the reference fixture compares the
        snapshots), and where the emulator logs requests, it received no write at all."""
        again, first = reference.rerun, reference.applied
        assert again is not None
        assert again["id"] == first["id"] and again["status"] == "succeeded", again["error"]
        assert again["config"].get("operation") is None, again["config"]["operation"]
        assert again["steps"] == first["steps"], "the re-run ran steps again"
        assert not reference.rerun_writes, f"the re-run wrote: {reference.rerun_writes}"

    def test_apply_then_destroy_killed_at_each_call_converge(
        self, sweep_emu: Any, reference: Reference, tmp_path: Path, index: int, apply_op: str | None,
        destroy_op: str | None,
    ) -> None:  # fmt: skip
        a = self.adapter
        cli = a.cli(tmp_path, sweep_emu)
        env_file = a.write_env(tmp_path, a.sweep_name(f"{a.name}-{index:02d}"), sweep_emu)

        def snap(job_id: str) -> dict[str, Any]:
            return a.snapshot(sweep_emu, env_file, job_id)

        with a.around_kill(sweep_emu, apply_op):
            killed_apply_then_killed_destroy(
                cli, env_file, apply_op, destroy_op, snap, reference.snapshot, lambda j: a.remaining(snap(j)),
                flags=a.flags,
            )  # fmt: skip

    def test_the_repair_sweep_covers_every_mutating_call(self, repair_reference: dict[str, Any]) -> None:
        got = {s: repair_reference[s] for s in self.adapter.REPAIR_OPS}
        assert got == self.adapter.REPAIR_OPS, f"REPAIR_OPS = {got!r}"

    def test_a_repair_killed_after_each_call_converges(
        self, repair_env: RepairEnv, scenario: str, repair_op: str
    ) -> None:
        a, env = self.adapter, repair_env
        env.clean = False
        a.make_drift(scenario, env)
        if a.CHECK_FOUND_EACH_CASE:
            assert env.drift(3), "the drift was not found"
        kill_after(env.cli, repair_op, *env.apply_args(a.flags))
        assert env.cli.recorded_status(env.name) == "running"
        if a.RESUME_REPAIR_WITH_RESUME:
            operation = env.cli.json("resume", env.name)["config"]["operation"]
            assert (operation["kind"], operation["status"]) == ("repair", "succeeded"), operation.get("error")
        else:  # the same apply again resumes the repair (it once ran provisioning, leaving the repair `running`)
            resumed = env.cli.json(*env.apply_args(a.flags))
            operation = resumed["config"]["operation"]
            assert resumed["status"] == "succeeded", resumed["error"]
            assert (operation["kind"], operation["status"]) == ("repair", "succeeded"), operation.get("error")
        left = env.drift(0)
        assert left == [], f"repair killed after {repair_op} left drift: {left}"
        a.check_repaired(scenario, env)
        env.clean = True
