"""Deliver the spec's runtime settings to running VMs through the exec channel (any cloud).

Only VMs whose recorded `RuntimeHash` differs get the script, so re-running a step (a resumed job, a
scale-out, a replacement VM) pushes exactly where it is missing.

Secrets by reference: the script holds only references (the VM fetches each value with its own identity,
bootstrap/runtime.py), and the wanted hash covers each reference's current version, read from the store's
metadata here: a new version of an unpinned secret makes every VM stale. `env:` references (Proxmox VE)
have no version: their values are read from vmplane's environment now, sent inside the script, and pushed
at every push, since vmplane cannot tell whether they changed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vmplane.bootstrap.runtime import render_push_script, runtime_hash
from vmplane.clouds.base import CloudDriver, Context, runtime_script_problem
from vmplane.clouds.registry import descriptor_for
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretRef, SecretStore, secret_refs
from vmplane.errors import VmplaneError
from vmplane.observe import redact
from vmplane.state import VMRecord, VMState

PUSH_TIMEOUT = 300.0


class RuntimePushError(VmplaneError):
    pass


@dataclass
class Wanted:
    """What the VMs should have: the hash, and the references and versions it covers."""

    hash: str
    refs: dict[str, SecretRef] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)

    @property
    def env_refs(self) -> dict[str, SecretRef]:
        return {f: r for f, r in self.refs.items() if r.store is SecretStore.env}

    @property
    def fetched(self) -> dict[str, SecretRef]:
        """The references the VMs read from a store themselves."""
        return {f: r for f, r in self.refs.items() if r.store is not SecretStore.env}


def wanted(driver: CloudDriver, spec: EnvSpec) -> Wanted:
    """The hash the VMs should carry. Only a spec with references asks the store (metadata only)."""
    refs = secret_refs(spec)
    if not refs:
        return Wanted(runtime_hash(spec))
    versions = driver.secret_access().versions(refs)
    return Wanted(runtime_hash(spec, versions), refs, versions)


def stale_vms(vms: list[VMRecord], want: Wanted) -> list[VMRecord]:
    """Ready VMs without the wanted settings; with `env:` references, every ready VM (no version to compare)."""
    return [v for v in vms if v.ID and v.State is VMState.ready and (want.env_refs or v.RuntimeHash != want.hash)]


def env_values(refs: Mapping[str, SecretRef], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each `env:` reference's value (by its text) from vmplane's environment, remembered as secret before
    anything else can print it. A variable not set: RuntimePushError naming the field and the variable."""
    env = os.environ if environ is None else environ
    missing = [f"{f}.secret: env:{r.name} is not set" for f, r in refs.items() if r.name not in env]
    if missing:
        raise RuntimePushError(
            "; ".join(missing) + " in vmplane's environment (read at push time, never stored): set it and push again"
        )
    values = {r.text: env[r.name] for r in refs.values()}
    redact.remember(values.values())
    return values


def push_runtime(driver: CloudDriver, ctx: Context, *, sandbox: bool, force: bool = False) -> int:
    """Push to every ready VM that lacks the current settings (`force`: to every ready VM); returns how
    many got them."""
    want = wanted(driver, ctx.spec)
    # Outside its schedule's hours the cloud has stopped a pool: a command to it would only time out.
    now = datetime.now(UTC)
    asleep = {n for n, p in ctx.spec.pools.items() if p.schedule is not None and not p.schedule.is_running_at(now)}
    awake = [v for v in ctx.infra.VMs if v.Pool not in asleep]
    stale = [v for v in awake if v.ID and v.State is VMState.ready] if force else stale_vms(awake, want)
    stopped = [
        v.Name
        for v in ctx.infra.VMs
        if (v.State is VMState.stopped or v.Pool in asleep) and v.ID and v.RuntimeHash != want.hash
    ]
    if stopped:
        ctx.log(
            f"runtime settings: {len(stopped)} stopped VMs ({', '.join(stopped)}) get them at `vmplane start` or "
            "the next apply while they run"
        )
    if not stale:
        ctx.log("runtime settings: every VM is up to date")
        return 0
    if want.env_refs and not force:
        ctx.log(
            f"runtime settings: {len(want.env_refs)} env: references have no version vmplane can compare, so "
            "every running VM gets the push (the script leaves unchanged files alone)"
        )
    # stepValidate refuses this first; an operation that changes only the runtime settings gets here.
    if problem := runtime_script_problem(ctx.spec, driver.capabilities.exec_payload_bytes):
        raise RuntimePushError(problem)
    script = _script(driver, ctx.spec, want)
    try:
        sent = driver.exec_channel.run(
            [str(v.ID) for v in stale], [script], PUSH_TIMEOUT, comment="vmplane runtime push"
        )
    except VmplaneError as err:
        if not want.env_refs:
            raise
        # The script held `env:` values: an API error that echoed part of the request must not reach the record.
        raise RuntimePushError(redact.redact(str(err))) from None
    results = {r.instance_id: r for r in sent}
    failed = []
    for vm in stale:
        result = results.get(str(vm.ID))
        if result is not None and result.ok:
            vm.RuntimeHash = want.hash
            ctx.infra.SecretVersions = dict(want.versions)
        else:
            detail = (result.stderr.strip().splitlines() or [result.status])[-1] if result else "no result"
            failed.append(f"{vm.Name}: {redact.redact(detail)}")
    ctx.save()
    if failed:
        raise RuntimePushError(f"runtime push failed on {len(failed)} VMs: " + "; ".join(failed))
    ctx.log(f"runtime settings ({_what(ctx.spec, want)}) pushed to {len(stale)} VMs through the exec channel")
    if sandbox:
        which = descriptor_for(driver.cloud).sandbox_exec_note
        ctx.log(
            f"sandbox: the emulator records the push command but runs nothing{which}, so no VM fetched its "
            f"{len(want.fetched)} secrets here (the script that would fetch them is in the recorded command)"
            if want.fetched
            else "sandbox: the emulator records the push command but does not run it"
        )
    return len(stale)


def _script(driver: CloudDriver, spec: EnvSpec, want: Wanted) -> str:
    source: dict[str, Any] | None = driver.secret_access().guest_source() if want.fetched else None
    values = env_values(want.env_refs) if want.env_refs else None
    script = render_push_script(spec, source=source, env_values=values, versions=want.versions)
    # runtime_script_problem measured the script without the fetcher's source: this one is what is sent.
    if (size := len(script.encode())) > (limit := driver.capabilities.exec_payload_bytes):
        raise RuntimePushError(
            f"runtime: the push script is {size // 1024} KB, more than the exec channel's {limit // 1024} KB"
        )
    return script


def _what(spec: EnvSpec, want: Wanted) -> str:
    what = f"{len(spec.runtime.env)} env vars, {len(spec.runtime.files)} files"
    if want.fetched:
        pinned = sum(1 for r in want.fetched.values() if r.pinned)
        what += f"; {len(want.fetched)} secrets the VMs fetch themselves ({pinned} pinned)"
    if want.env_refs:
        what += f"; {len(want.env_refs)} from vmplane's environment (env:), sent in the script, not stored"
    return what
