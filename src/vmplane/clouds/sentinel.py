"""The one wait for the bootstrap's sentinel, shared by the drivers: each feeds it its own way of reading
one VM's sentinel (a guest attribute, a file read through the guest agent) and its own pace.

Every VM in `bootstrap` becomes `ready` once its read says so; at the spec's `bootstrap.timeoutSeconds`
the late ones become `failed` and the step fails, naming them with what their bootstrap logged. A
sentinel an emulator's guest wrote (no VM booted) is said to be one in the job's log; the marker is
honoured on an emulator target only, so nothing a real guest writes can make a real boot look simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vmplane.clouds.base import Context, bootstrap_timed_out
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.waits import LATE, poll
from vmplane.state import VMRecord, VMState

# What the log says of VMs whose sentinel an emulator's simulated guest wrote.
SIMULATED_NOTE = "the sentinel was written by the emulator's simulated guest: no VM booted"


@dataclass(frozen=True)
class Seen:
    """One read of a VM's sentinel."""

    ready: bool = False
    simulated: bool = False  # the sentinel says an emulator's guest wrote it, not a bootstrap that ran
    failed: str = ""  # what the bootstrap logged when it wrote no sentinel (its last lines), if it said
    address: str | None = None  # the guest's private address, where the read also learns it


NOT_YET = Seen()


@dataclass(frozen=True)
class Pace:
    """The poll's backoff (clouds/waits.poll): a cloud whose reads cost a quota waits longer between them."""

    first: float
    cap: float
    factor: float = 1.6
    late: float | None = LATE


def bootstrapping(vms: list[VMRecord]) -> list[VMRecord]:
    """The VMs whose sentinel is still awaited (placed: an id and a zone or node to read it from)."""
    return [v for v in vms if v.ID and v.AZ and v.State is VMState.bootstrap]


def wait_sentinels(
    ctx: Context,
    vms: list[VMRecord],
    read: Callable[[VMRecord], Seen],
    *,
    timeout: float,
    pace: Pace,
    read_through: str,
    emulator: bool,
    simulated_note: str = SIMULATED_NOTE,
    last_words: Callable[[VMRecord], str] | None = None,
) -> None:
    """Read every bootstrapping VM's sentinel each round (saving the records after each) until none is
    left. `read_through` ends the log line ("N VMs ready (<read_through>)"); `emulator` says the target
    is an emulator, where a simulated sentinel is logged as `simulated_note`; `last_words`, at the
    deadline (`timeout`: the spec's bootstrap.timeoutSeconds), fetches a late VM's bootstrap log for the
    error when its reads carried none."""
    simulated: list[str] = []
    reasons: dict[str, str] = {}

    def all_ready() -> bool | None:
        for vm in bootstrapping(vms):
            seen = read(vm)
            if seen.ready:
                vm.State = VMState.ready
                vm.PrivateIP = seen.address or vm.PrivateIP
                if seen.simulated and emulator:
                    simulated.append(vm.Name)
            elif seen.failed:
                reasons[vm.Name] = seen.failed
        ctx.save()
        return None if any(v.State is VMState.bootstrap for v in vms) else True

    try:
        poll(
            all_ready,
            what="the bootstrap sentinel",
            timeout=timeout,
            first=pace.first,
            factor=pace.factor,
            cap=pace.cap,
            late=pace.late,
        )
    except DeadlineExceededError as err:
        if last_words is not None:
            for vm in bootstrapping(vms):
                if vm.Name not in reasons and (said := last_words(vm)):
                    reasons[vm.Name] = said
        raise bootstrap_timed_out(ctx, vms, timeout, reasons) from err
    if simulated:
        ctx.log(f"{simulated_note} ({', '.join(simulated)})")
    ctx.log(f"{sum(v.State is VMState.ready for v in vms)} VMs ready ({read_through})")
