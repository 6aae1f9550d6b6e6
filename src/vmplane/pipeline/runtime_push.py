"""Deliver the spec's runtime settings to running VMs through the exec channel (any cloud).

Only VMs whose recorded `RuntimeHash` differs get the script, so re-running a step (a resumed job, a
scale-out, a replacement VM) pushes exactly where it is missing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from vmplane.bootstrap.runtime import render_push_script, runtime_hash
from vmplane.clouds.base import CloudDriver, Context, runtime_script_problem
from vmplane.errors import VmplaneError
from vmplane.state import VMState

PUSH_TIMEOUT = 300.0


class RuntimePushError(VmplaneError):
    pass


def push_runtime(driver: CloudDriver, ctx: Context, *, sandbox: bool) -> int:
    """Push to every ready VM that lacks the current settings; returns how many got them."""
    want = runtime_hash(ctx.spec)
    # Outside its schedule's hours the cloud has stopped a pool: a command to it would only time out.
    now = datetime.now(UTC)
    asleep = {n for n, p in ctx.spec.pools.items() if p.schedule is not None and not p.schedule.is_running_at(now)}
    stale = [
        v for v in ctx.infra.VMs if v.ID and v.State is VMState.ready and v.RuntimeHash != want and v.Pool not in asleep
    ]
    stopped = [
        v.Name
        for v in ctx.infra.VMs
        if (v.State is VMState.stopped or v.Pool in asleep) and v.ID and v.RuntimeHash != want
    ]
    if stopped:
        ctx.log(
            f"runtime settings: {len(stopped)} stopped VMs ({', '.join(stopped)}) get them at `vmplane start` or "
            "the next apply while they run"
        )
    if not stale:
        ctx.log("runtime settings: every VM is up to date")
        return 0
    # stepValidate refuses this first; an operation that changes only the runtime settings gets here.
    if problem := runtime_script_problem(ctx.spec, driver.capabilities.exec_payload_bytes):
        raise RuntimePushError(problem)
    script = render_push_script(ctx.spec)
    results = {
        r.instance_id: r
        for r in driver.run_command([str(v.ID) for v in stale], [script], PUSH_TIMEOUT, comment="vmplane runtime push")
    }
    failed = []
    for vm in stale:
        result = results.get(str(vm.ID))
        if result is not None and result.ok:
            vm.RuntimeHash = want
        else:
            detail = (result.stderr.strip().splitlines() or [result.status])[-1] if result else "no result"
            failed.append(f"{vm.Name}: {detail}")
    ctx.save()
    if failed:
        raise RuntimePushError(f"runtime push failed on {len(failed)} VMs: " + "; ".join(failed))
    what = f"{len(ctx.spec.runtime.env)} env vars, {len(ctx.spec.runtime.files)} files"
    ctx.log(f"runtime settings ({what}) pushed to {len(stale)} VMs through the exec channel")
    if sandbox:
        ctx.log("sandbox: the emulator records the push command but does not run it")
    return len(stale)
