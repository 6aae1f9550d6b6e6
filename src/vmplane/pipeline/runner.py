"""Run one named step of a job: read state, call the cloud driver, write state.

Independent of DBOS so it can be tested directly; `workflows.py` wraps each call in a durable step.
A step already recorded as succeeded is skipped, so resuming a job continues where it stopped; every
step is idempotent anyway, because a crash can land between a cloud call and its checkpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from vmplane.clouds.base import API_CALLS, CloudDriver, Context, Tagger
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.registry import driver_for
from vmplane.jobs import service as jobs
from vmplane.jobs.service import JobStatus, JobView, StepStatus
from vmplane.spec.models import BootstrapMode
from vmplane.state import VMState
from vmplane.store.db import transaction

StepFn = Callable[[CloudDriver, Context, JobView], None]
MAX_LOG_LINES = 50


class StepFailedError(RuntimeError):
    """A step failed; the message is what the user sees (never a credential or a signed request)."""


def _validate(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    if ctx.spec.load_balancer is not None:
        raise UnsupportedError(
            "loadBalancer: the load balancer steps (stepCreateLoadBalancer ...) are not available yet; "
            "remove the loadBalancer block to provision the VMs now"
        )
    driver.preflight(ctx)


def _register(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    infra = ctx.infra
    outputs = {
        "vpcId": infra.VpcID,
        "privateSubnetIds": infra.PrivateSubnetIDs,
        "vmSecurityGroupId": infra.VMSecurityGroupID,
        "launchTemplates": infra.LaunchTemplateID,
        "scalingGroups": infra.ScalingGroupID,
        "execMode": infra.ExecMode,
        "vms": [
            {"name": v.Name, "id": v.ID, "privateIp": v.PrivateIP, "az": v.AZ, "state": v.State.value}
            for v in infra.VMs
        ],
        "target": job.target.describe(),
    }
    with transaction(_db_url()) as s:
        jobs.register_env(s, jobs.get_row(s, ctx.job_id), outputs)
    ctx.log(f"registered {ctx.spec.org}/{ctx.spec.name} in the inventory")


def _finalize(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    infra = ctx.infra
    all_ready = bool(infra.VMs) and all(v.State == VMState.ready for v in infra.VMs)
    infra.BootstrapNginxReady = all_ready and ctx.spec.bootstrap.mode == BootstrapMode.nginx
    ctx.save()
    if job.target.sandbox:
        ctx.log("sandbox: the emulator does not run commands, so the sentinel check proves the request only")
    ctx.log(f"{len(infra.VMs)} VMs, BootstrapNginxReady={infra.BootstrapNginxReady}")


def _not_yet(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    raise UnsupportedError("load balancer steps are not implemented yet")


def _detach_lb(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    if ctx.infra.LoadBalancerID:
        raise UnsupportedError("load balancer teardown is not implemented yet")
    ctx.log("no load balancer attached")


def _unregister(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    left = driver.leftovers(ctx)
    if left:
        listed = ", ".join(f"{x.kind} {x.id}" for x in left[:20])
        raise StepFailedError(f"{len(left)} resources tagged with {ctx.job_id} remain: {listed}")
    with transaction(_db_url()) as s:
        jobs.unregister_env(s, ctx.spec.org, ctx.spec.name)
    ctx.log("nothing tagged with this job remains; removed from the inventory")


STEPS: dict[str, StepFn] = {
    "stepValidate": _validate,
    "stepCreateNetwork": lambda d, c, j: d.ensure_network(c),
    "stepCreateIAM": lambda d, c, j: d.ensure_identity(c),
    "stepCreateLaunchTemplate": lambda d, c, j: d.ensure_launch_templates(c),
    "stepCreateVMs": lambda d, c, j: d.ensure_vms(c),
    "stepCreateLoadBalancer": _not_yet,
    "stepCreateTargetGroup": _not_yet,
    "stepCreateListener": _not_yet,
    "stepCreateDNSRecord": _not_yet,
    "stepRegisterSpace": _register,
    "stepFinalize": _finalize,
    "stepDetachLoadBalancer": _detach_lb,
    "stepTerminateVMs": lambda d, c, j: d.delete_vms(c),
    "stepDeleteLaunchTemplate": lambda d, c, j: d.delete_launch_templates(c),
    "stepDeleteSecurityGroup": lambda d, c, j: d.delete_security_group(c),
    "stepDeleteIAM": lambda d, c, j: d.delete_identity(c),
    "stepDeleteNetwork": lambda d, c, j: d.delete_network(c),
    "stepUnregisterSpace": _unregister,
}


def _db_url() -> str:
    from vmplane.settings import get_settings

    return get_settings().db_url


def run_step(job_id: str, name: str, *, teardown: bool = False) -> str:
    """Run step `name` of job `job_id`; returns its final status. Raises StepFailedError on failure."""
    url = _db_url()
    with transaction(url) as s:
        job = jobs.view(jobs.get_row(s, job_id))
        records = job.teardown_steps if teardown else job.steps
        done = next((r for r in records if r.name == name and r.status is StepStatus.succeeded), None)
        if done is not None:
            return StepStatus.succeeded.value
        jobs.update_step(s, job_id, name, teardown=teardown, status=StepStatus.running)

    log: list[str] = []
    infra = job.infra

    def save() -> None:
        with transaction(url) as s:
            jobs.save_infra(s, job_id, infra)

    def note(msg: str) -> None:
        log.append(msg)
        del log[:-MAX_LOG_LINES]

    ctx = Context(
        job_id=job_id, spec=job.spec, infra=infra, tagger=Tagger.for_spec(job.spec, job_id), save=save, log=note
    )
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        STEPS[name](driver_for(job.target), ctx, job)
    except Exception as err:
        message = _describe(err)
        with transaction(url) as s:
            jobs.save_infra(s, job_id, infra)
            jobs.update_step(
                s,
                job_id,
                name,
                teardown=teardown,
                status=StepStatus.failed,
                error=message,
                api_calls=dict(tally),
                log=log,
            )
        raise StepFailedError(f"{name}: {message}") from err
    finally:
        API_CALLS.reset(token)
    with transaction(url) as s:
        jobs.save_infra(s, job_id, infra)
        jobs.update_step(
            s, job_id, name, teardown=teardown, status=StepStatus.succeeded, api_calls=dict(tally), log=log
        )
    return StepStatus.succeeded.value


def _describe(err: BaseException) -> str:
    from vmplane.clouds.errors import CloudError

    if isinstance(err, CloudError | StepFailedError):
        return str(err)
    return f"{type(err).__name__}: {err}"


def start_job(job_id: str, *, teardown: bool) -> list[str]:
    """Mark the job running (or deleting) and return the step names to run in order."""
    with transaction(_db_url()) as s:
        row = jobs.get_row(s, job_id)
        if not teardown:
            jobs.set_status(s, job_id, JobStatus.running)
        return [r["name"] for r in (row.teardown_steps if teardown else row.steps)]


def finish_job(job_id: str, *, teardown: bool, error: str | None) -> str:
    if teardown:
        status = JobStatus.delete_failed if error else JobStatus.deleted
    else:
        status = JobStatus.failed if error else JobStatus.succeeded
    with transaction(_db_url()) as s:
        jobs.set_status(s, job_id, status, error)
    return status.value


def job_summary(job_id: str) -> dict[str, Any]:
    with transaction(_db_url()) as s:
        return jobs.view(jobs.get_row(s, job_id)).to_json()
