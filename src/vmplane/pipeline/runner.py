"""Run one named step of a job: read state, call the cloud driver, write state.

Independent of DBOS so it can be tested directly; `workflows.py` wraps each call in a durable step.
A step already recorded as succeeded is skipped, so resuming a job continues where it stopped; every
step is idempotent anyway, because a crash can land between a cloud call and its checkpoint.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from vmplane.bootstrap import vmconfig
from vmplane.clouds.base import API_CALLS, CloudDriver, Context, Tagger
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.registry import driver_for
from vmplane.cost.history import record_finish
from vmplane.envspec.models import BootstrapMode
from vmplane.errors import VmplaneError
from vmplane.observe import logs, metrics, tracing
from vmplane.observe.scope import scoped
from vmplane.pipeline.plan import step_graph
from vmplane.pipeline.runtime_push import RuntimePushError, push_runtime
from vmplane.pipeline.stepgraph import Hooks, StepGraph, execute
from vmplane.state import VMState
from vmplane.store import job_rows as jobs
from vmplane.store.db import transaction
from vmplane.store.job_records import JobStatus, JobView, OperationStatus, Phase, StepStatus
from vmplane.target import Target

_log = logs.get(__name__)
T = TypeVar("T")
StepFn = Callable[[CloudDriver, Context, JobView], None]
MAX_LOG_LINES = 50


class StepFailedError(VmplaneError):
    """A step failed; the message is what the user sees (never a credential or a signed request)."""


def _validate(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    problems = driver.validate(ctx.spec)
    # Every cloud's: a pool whose family or NGINX image is unpinned would fail closed at boot. Nothing
    # boots on the sandbox, so there the log says what a real VM would lack and the apply goes on.
    # Elsewhere plan_apply fetched (or refused, before the job existed) what the current manifests lacked:
    # this is the safety net for what it does not see (a resumed job's recorded manifest, a cache emptied since).
    if job.target.sandbox:
        for note in vmconfig.sandbox_notes(ctx.spec, recorded=ctx.vmconfig):
            ctx.log(note)
    else:
        problems += vmconfig.problems(ctx.spec, recorded=ctx.vmconfig)  # what the VMs will render
    if problems:
        raise UnsupportedError("; ".join(problems), code="Unsupported")
    driver.preflight(ctx)


def _register(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    infra = ctx.infra
    outputs = {
        **driver.outputs(ctx.spec, infra),
        "networkId": infra.NetworkID,
        "vmSubnetIds": infra.VMSubnetIDs,
        "vmSecurityGroupId": infra.VMSecurityGroupID,
        "launchTemplates": infra.LaunchTemplateID,
        "scalingGroups": infra.ScalingGroupID,
        "execMode": infra.ExecMode,
        "loadBalancer": (
            {"dnsName": infra.LoadBalancerDNSName, "domain": ctx.spec.load_balancer.domain}
            if infra.LoadBalancerID and ctx.spec.load_balancer
            else None
        ),
        "vms": [
            {
                "name": v.Name,
                "id": v.ID,
                "privateIp": v.PrivateIP,
                "az": v.AZ,
                "state": v.State.value,
                "templateVersion": v.LaunchTemplateVersion,
            }
            for v in infra.VMs
        ],
        "outdatedVms": [v.Name for v in infra.outdated_vms()],
        "target": job.target.describe(),
    }
    _write(_db_url(), lambda s: jobs.register_env(s, jobs.get_row(s, ctx.job_id), outputs))
    ctx.log(f"registered {ctx.spec.org}/{ctx.spec.name} in the inventory")


def _finalize(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    infra = ctx.infra
    all_ready = bool(infra.VMs) and all(v.State == VMState.ready for v in infra.VMs)
    infra.BootstrapNginxReady = all_ready and ctx.spec.bootstrap.mode == BootstrapMode.nginx
    ctx.save()
    if job.target.sandbox:
        ctx.log("sandbox: the emulator does not run commands, so the sentinel check proves the request only")
    ctx.log(f"{len(infra.VMs)} VMs, BootstrapNginxReady={infra.BootstrapNginxReady}")
    push_runtime(driver, ctx, sandbox=job.target.sandbox)
    _note_outdated(ctx)


def _note_outdated(ctx: Context) -> None:
    outdated = ctx.infra.outdated_vms()
    if outdated:
        pools = sorted({v.Pool for v in outdated})
        ctx.notes.append(
            f"{len(outdated)} VMs run an older launch template version ({', '.join(v.Name for v in outdated)}); "
            f"nothing was replaced: run `vmplane rotate {ctx.spec.name}` to replace them "
            f"(pools: {', '.join(pools)})"
        )
        ctx.log(ctx.notes[-1])


def _detach_lb(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    # In teardown the VMs go next; as a vmOp they stay and get their VPC-internal ingress back.
    driver.detach_load_balancer(ctx, keep_vms=job.status is not JobStatus.deleting)


def _create_vms(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.ensure_vms(ctx)
    driver.ensure_schedules(ctx)  # a schedule may name the instances just created


def _terminate_vms(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.delete_schedules(ctx)  # first: a scheduled start must not race the teardown
    driver.delete_vms(ctx)


def _stop_start(driver: CloudDriver, ctx: Context, job: JobView, *, stop: bool) -> None:
    op = job.operation
    wanted = op.params.get("pool") if op else None
    for pool in [wanted] if wanted else sorted(ctx.spec.pools):
        if stop:
            driver.stop_pool(ctx, pool)
        else:
            driver.start_pool(ctx, pool)
    if not stop:
        push_runtime(driver, ctx, sandbox=job.target.sandbox)  # a scaling group's new VMs get the settings


def _scale(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.ensure_vms(ctx)
    driver.ensure_schedules(ctx)  # a Fixed pool's schedule names its instances
    if ctx.infra.LoadBalancerID:
        driver.ensure_target_group(ctx)  # registers new Fixed-pool VMs
    push_runtime(driver, ctx, sandbox=job.target.sandbox)  # new VMs get the runtime settings


def _rotate(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    op = job.operation
    wanted = op.params.get("pool") if op else None
    for pool in [wanted] if wanted else sorted(ctx.spec.pools):
        ctx.notes.extend(driver.rotate_pool(ctx, pool))
    driver.ensure_schedules(ctx)  # replacements have new instance ids
    push_runtime(driver, ctx, sandbox=job.target.sandbox)  # replacements get the runtime settings
    _note_outdated(ctx)


def _push(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    # `vmplane push --force`: every running VM, whatever its recorded hash says.
    force = bool(job.operation.params.get("force")) if job.operation and job.operation.kind == "push" else False
    push_runtime(driver, ctx, sandbox=job.target.sandbox, force=force)


def _unregister(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    left = driver.leftovers(ctx)
    if left:
        listed = ", ".join(f"{x.kind} {x.id}" for x in left[:20])
        raise StepFailedError(f"{len(left)} resources tagged with {ctx.job_id} remain: {listed}")
    # Only this job's entry: the same name's job on the other target (sandbox or real) may hold it.
    _write(_db_url(), lambda s: jobs.unregister_env(s, ctx.spec.org, ctx.spec.name, ctx.job_id))
    ctx.log("nothing tagged with this job remains; removed from the inventory")


STEPS: dict[str, StepFn] = {
    "stepValidate": _validate,
    "stepCreateNetwork": lambda d, c, j: d.ensure_network(c),
    "stepCreateIAM": lambda d, c, j: d.ensure_identity(c),
    "stepCreateLaunchTemplate": lambda d, c, j: d.ensure_launch_templates(c),
    "stepCreateVMs": _create_vms,
    "stepCreateLoadBalancer": lambda d, c, j: d.ensure_load_balancer(c),
    "stepCreateTargetGroup": lambda d, c, j: d.ensure_target_group(c),
    "stepCreateListener": lambda d, c, j: d.ensure_listener(c),
    "stepCreateDNSRecord": lambda d, c, j: d.ensure_dns_record(c),
    "stepRegisterSpace": _register,
    "stepFinalize": _finalize,
    "stepDetachLoadBalancer": _detach_lb,
    "stepTerminateVMs": _terminate_vms,
    "stepDeleteLaunchTemplate": lambda d, c, j: d.delete_launch_templates(c),
    "stepDeleteSecurityGroup": lambda d, c, j: d.delete_security_group(c),
    "stepDeleteIAM": lambda d, c, j: d.delete_identity(c),
    "stepDeleteNetwork": lambda d, c, j: d.delete_network(c),
    "stepUnregisterSpace": _unregister,
    # Operations (vmOp) on a provisioned job
    "stepScalePool": _scale,
    "stepUpdateTags": lambda d, c, j: d.update_tags(c),
    "stepRotateVMs": _rotate,
    "stepPushRuntime": lambda d, c, j: _push(d, c, j),
    "stepStopPools": lambda d, c, j: _stop_start(d, c, j, stop=True),
    "stepStartPools": lambda d, c, j: _stop_start(d, c, j, stop=False),
    "stepRepairDrift": lambda d, c, j: d.repair_drift(c),
}


def _db_url() -> str:
    from vmplane.settings import get_settings

    return get_settings().db_url


# Steps run side by side in threads of this process; their writes to the job row are serialised here
# (and each write reads the row afresh), so one step's record never overwrites another's.
_WRITE_LOCK = threading.Lock()


def _write(url: str, fn: Callable[[Session], T], attempts: int = 5) -> T:
    """Apply `fn` to the job row in its own transaction. Another process may have written the row since
    it was read (the row is versioned): then read it again and re-apply; every `fn` here is a merge."""
    for attempt in range(attempts):
        try:
            with _WRITE_LOCK, transaction(url) as s:
                return fn(s)
        except StaleDataError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def run_step(job_id: str, name: str, phase: Phase = Phase.provision, hooks: Hooks | None = None) -> str:
    """Run step `name` of job `job_id`; returns its final status. Raises StepFailedError on failure.
    `hooks` connect it to the steps running beside it (`pipeline.stepgraph`)."""
    url = _db_url()
    with transaction(url) as s:
        job = jobs.view(jobs.get_row(s, job_id))
    if any(r.name == name and r.status is StepStatus.succeeded for r in job.steps_of(phase)):
        return StepStatus.succeeded.value
    cloud = str(job.config["target"]["cloud"])
    attrs = {"vmplane.job": job_id, "vmplane.step": name, "vmplane.phase": phase.value, "cloud": cloud}
    with scoped(job=job_id, phase=phase.value, step=name, org=job.org, cloud=cloud), tracing.span(name, attrs):
        _log.info("%s started", name)
        started = time.monotonic()
        error, message = _execute(url, job, name, phase, hooks)
        seconds = time.monotonic() - started
        metrics.observe_step(name, cloud, phase.value, "failed" if error else "succeeded", seconds)
        if error is not None:
            _log.warning("%s failed after %.2fs: %s", name, seconds, message)
            raise StepFailedError(f"{name}: {message}") from error  # inside the span: it records the error
        _log.info("%s succeeded in %.2fs", name, seconds)
    return StepStatus.succeeded.value


def _execute(
    url: str, job: JobView, name: str, phase: Phase, hooks: Hooks | None
) -> tuple[BaseException | None, str | None]:
    """Run the step's function and record its end on the job row; returns its error and the message."""
    job_id = job.id
    _write(url, lambda s: jobs.update_step(s, job_id, name, phase=phase, status=StepStatus.running))

    log: list[str] = []
    infra = job.infra
    base = infra.model_dump(mode="json")

    def save() -> None:
        nonlocal base
        snapshot = infra.model_dump(mode="json")
        _write(url, lambda s: jobs.save_infra(s, job_id, infra, base))
        base = snapshot

    def note(msg: str) -> None:
        _log.info("%s", msg)  # the step log's lines, in the process's log too
        log.append(msg)
        del log[:-MAX_LOG_LINES]

    def reached(milestone: str) -> None:
        save()  # what a dependent reads when it starts must be in the job row first
        if hooks is not None:
            note(f"{milestone}: the steps that need it may start")
            hooks.reached(milestone)

    ctx = Context(
        job_id=job_id,
        spec=job.spec,
        infra=infra,
        tagger=Tagger.for_spec(job.spec, job_id),
        save=save,
        log=note,
        reached=reached,
        wait_inputs=hooks.wait_inputs if hooks is not None else lambda: None,
        vmconfig=vmconfig.recorded_digests(job.config),
    )
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    error: BaseException | None = None
    try:
        STEPS[name](driver_for(job.target), ctx, job)
        if hooks is not None:
            save()  # its dependents may start now, and read the job row when they do
            done = time.monotonic()
            hooks.settle()  # returns once what it needs has completed: it is recorded after them
            if (waited := time.monotonic() - done) >= 0.1:
                note(f"work done; {waited:.1f}s more until the steps it needs had completed")
    except Exception as err:
        error = err
    finally:
        API_CALLS.reset(token)
    message = _describe(error) if error else None

    def finish(s: Session) -> None:
        jobs.save_infra(s, job_id, infra, base)
        status = StepStatus.failed if error else StepStatus.succeeded
        jobs.update_step(s, job_id, name, phase=phase, status=status, error=message, api_calls=dict(tally), log=log)
        if ctx.notes and phase is Phase.operation:
            jobs.add_operation_notes(s, job_id, ctx.notes)

    _write(url, finish)
    return error, message


def run_steps(job_id: str, graph: StepGraph, phase: Phase) -> None:
    """Run the job's steps, each as soon as what it needs is met; raise the first failure in step order."""
    execute(graph, lambda name, hooks: run_step(job_id, name, phase, hooks))


def _describe(err: BaseException) -> str:
    from vmplane.clouds.errors import CloudError

    if isinstance(err, CloudError | StepFailedError | RuntimePushError):
        return str(err)
    return f"{type(err).__name__}: {err}"


def start_job(job_id: str, phase: Phase) -> StepGraph:
    """Mark the job running and return its steps with what each needs before it starts."""

    def begin(s: Session) -> StepGraph:
        row = jobs.get_row(s, job_id)
        if phase is Phase.operation:
            jobs.set_operation_status(s, job_id, OperationStatus.running)
        if phase is not Phase.teardown:
            jobs.set_status(s, job_id, JobStatus.running)
        driver = driver_for(Target.model_validate(row.config["target"]))
        names = jobs.step_names(row, phase)
        return StepGraph(names, step_graph(names, driver.step_dependencies()), driver.early_steps() & set(names))

    return _write(_db_url(), begin)


def finish_job(job_id: str, phase: Phase, error: str | None) -> str:
    if phase is Phase.teardown:
        status = JobStatus.delete_failed if error else JobStatus.deleted
    else:
        status = JobStatus.failed if error else JobStatus.succeeded

    def finish(s: Session) -> None:
        if phase is Phase.operation:
            op_status = OperationStatus.failed if error else OperationStatus.succeeded
            jobs.set_operation_status(s, job_id, op_status, error=error)
        row = jobs.set_status(s, job_id, status, error)
        if error is None:  # the billed shape changed: one entry in the job's cost history
            ledger = record_finish(row.config, row.steps or [], phase.value, row.created_at, datetime.now(UTC))
            row.config = {**row.config, "costLedger": ledger}

    _write(_db_url(), finish)
    return status.value
