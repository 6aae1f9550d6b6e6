"""clouds/sentinel.py: the one bootstrap-sentinel wait each driver feeds with its own read, against a
fake clock (no real sleeping) and scripted reads."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vmplane.clouds import sentinel, waits
from vmplane.clouds.base import Context
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.envspec.load import load_spec
from vmplane.state import VMRecord, VMState

from .faults import FakeClock
from .support import EXAMPLE, make_ctx

PACE = sentinel.Pace(first=1.0, cap=4.0, late=None)  # the backoff alone: sleeps 1, 1.6, 2.56, 4, 4...


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(waits, "time", fake)
    return fake


def _ctx(*states: VMState) -> Context:
    ctx = make_ctx(load_spec(EXAMPLE))
    ctx.infra.VMs = [
        VMRecord(Name=f"demo-web-{i}", Pool="web", Index=i, ID=f"vm-{i}", AZ="zone-a", State=s)
        for i, s in enumerate(states)
    ]
    return ctx


def _logs(ctx: Context) -> list[str]:
    return ctx.log.__self__  # type: ignore[attr-defined, no-any-return]  # make_ctx logs to a list's append


def _reads(script: dict[str, list[sentinel.Seen]]) -> Callable[[VMRecord], sentinel.Seen]:
    """Each VM's reads in order (its last answer repeats)."""

    def read(vm: VMRecord) -> sentinel.Seen:
        answers = script[vm.Name]
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return read


def test_vms_become_ready_as_their_reads_say_and_the_log_says_how(clock: FakeClock) -> None:
    ctx = _ctx(VMState.bootstrap, VMState.bootstrap, VMState.ready)
    ready = sentinel.Seen(ready=True, address="10.0.0.5")
    reads = _reads({"demo-web-0": [ready], "demo-web-1": [sentinel.NOT_YET, sentinel.NOT_YET, ready]})
    sentinel.wait_sentinels(ctx, ctx.infra.VMs, reads, timeout=60, pace=PACE, read_through="via X", emulator=False)
    assert [v.State for v in ctx.infra.VMs] == [VMState.ready] * 3
    assert [v.PrivateIP for v in ctx.infra.VMs[:2]] == ["10.0.0.5", "10.0.0.5"]
    assert _logs(ctx) == ["3 VMs ready (via X)"]
    assert clock.sleeps == [1.0, 1.6]  # the pace's backoff, one sleep per round
    assert ctx.save.calls == 3  # type: ignore[attr-defined]  # after every round


@pytest.mark.parametrize("emulator", [True, False])
def test_a_simulated_sentinel_is_said_so_on_an_emulator_only(clock: FakeClock, emulator: bool) -> None:
    ctx = _ctx(VMState.bootstrap, VMState.bootstrap)
    sim, real = sentinel.Seen(ready=True, simulated=True), sentinel.Seen(ready=True)
    reads = _reads({"demo-web-0": [sim], "demo-web-1": [real]})
    sentinel.wait_sentinels(ctx, ctx.infra.VMs, reads, timeout=60, pace=PACE, read_through="r", emulator=emulator)
    note = f"{sentinel.SIMULATED_NOTE} (demo-web-0)"
    assert _logs(ctx) == ([note] if emulator else []) + ["2 VMs ready (r)"]
    assert "test" not in sentinel.SIMULATED_NOTE  # it names the emulator, not who drives it


def test_at_the_deadline_the_late_vms_fail_with_what_their_bootstrap_said(clock: FakeClock) -> None:
    ctx = _ctx(VMState.bootstrap, VMState.bootstrap, VMState.bootstrap)
    reads = _reads(
        {
            "demo-web-0": [sentinel.Seen(ready=True)],
            "demo-web-1": [sentinel.Seen(failed="artifact nginx unpinned")],
            "demo-web-2": [sentinel.NOT_YET],
        }
    )
    asked: list[str] = []

    def last_words(vm: VMRecord) -> str:
        asked.append(vm.Name)
        return "disk full"

    with pytest.raises(DeadlineExceededError) as err:
        sentinel.wait_sentinels(
            ctx, ctx.infra.VMs, reads, timeout=10, pace=PACE, read_through="r", emulator=True, last_words=last_words
        )
    assert [v.State for v in ctx.infra.VMs] == [VMState.ready, VMState.failed, VMState.failed]
    assert str(err.value).startswith(
        "bootstrap sentinel not seen within 10s on demo-web-1, demo-web-2; "
        "the bootstrap logged: demo-web-1: artifact nginx unpinned; demo-web-2: disk full;"
    )
    assert asked == ["demo-web-2"]  # a late VM whose reads said nothing; a read's own reason is kept
    assert sum(clock.sleeps) == pytest.approx(10)
    assert _logs(ctx) == []


def test_nothing_bootstrapping_reads_nothing(clock: FakeClock) -> None:
    ctx = _ctx(VMState.ready, VMState.pending)

    def read(vm: VMRecord) -> sentinel.Seen:
        raise AssertionError(f"read {vm.Name}")

    sentinel.wait_sentinels(ctx, ctx.infra.VMs, read, timeout=60, pace=PACE, read_through="r", emulator=False)
    assert _logs(ctx) == ["1 VMs ready (r)"] and clock.sleeps == []
