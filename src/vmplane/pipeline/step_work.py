"""What each pipeline step runs: calls on the driver's parts (`clouds.interfaces`), and the pipeline's own
work (validation, the inventory, the runtime push). Declared with their steps in `pipeline.steps`."""

from __future__ import annotations

from vmplane.bootstrap import vmconfig
from vmplane.clouds.base import CloudDriver, Context
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.interfaces import LoadBalancer
from vmplane.envspec.models import BootstrapMode
from vmplane.errors import VmplaneError
from vmplane.pipeline.rows import db_url, write
from vmplane.pipeline.runtime_push import push_runtime
from vmplane.state import VMState
from vmplane.store import job_rows as jobs
from vmplane.store.job_records import JobStatus, JobView


class StepFailedError(VmplaneError):
    """A step failed; the message is what the user sees (never a credential or a signed request)."""


def lb(driver: CloudDriver) -> LoadBalancer:
    """The driver's LB part; stepValidate refused an LB on a driver without one, so this is a bug's guard."""
    if driver.lb is None:
        raise driver.unsupported("load balancers")
    return driver.lb


def _schedules(driver: CloudDriver, ctx: Context) -> None:
    if driver.scheduler is not None:  # none: stepValidate refused a scheduled pool
        driver.scheduler.ensure(ctx)


def network(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.network.ensure(ctx)


def validate(driver: CloudDriver, ctx: Context, job: JobView) -> None:
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


def register(driver: CloudDriver, ctx: Context, job: JobView) -> None:
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
    write(db_url(), lambda s: jobs.register_env(s, jobs.get_row(s, ctx.job_id), outputs))
    ctx.log(f"registered {ctx.spec.org}/{ctx.spec.name} in the inventory")


def finalize(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    infra = ctx.infra
    all_ready = bool(infra.VMs) and all(v.State == VMState.ready for v in infra.VMs)
    infra.BootstrapNginxReady = all_ready and ctx.spec.bootstrap.mode == BootstrapMode.nginx
    ctx.save()
    if job.target.sandbox:
        ctx.log("sandbox: the emulator does not run commands, so the sentinel check proves the request only")
    ctx.log(f"{len(infra.VMs)} VMs, BootstrapNginxReady={infra.BootstrapNginxReady}")
    push_runtime(driver, ctx, sandbox=job.target.sandbox)
    note_outdated(ctx)


def note_outdated(ctx: Context) -> None:
    outdated = ctx.infra.outdated_vms()
    if outdated:
        pools = sorted({v.Pool for v in outdated})
        ctx.notes.append(
            f"{len(outdated)} VMs run an older launch template version ({', '.join(v.Name for v in outdated)}); "
            f"nothing was replaced: run `vmplane rotate {ctx.spec.name}` to replace them "
            f"(pools: {', '.join(pools)})"
        )
        ctx.log(ctx.notes[-1])


def detach_lb(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    # In teardown the VMs go next; as a vmOp they stay and get their VPC-internal ingress back.
    if driver.lb is not None:  # a driver without LBs has nothing to remove
        driver.lb.detach(ctx, keep_vms=job.status is not JobStatus.deleting)


def create_vms(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.pools.ensure_vms(ctx)
    _schedules(driver, ctx)  # a schedule may name the instances just created


def terminate_vms(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    if driver.scheduler is not None:
        driver.scheduler.delete(ctx)  # first: a scheduled start must not race the teardown
    driver.pools.delete_vms(ctx)


def stop_start(driver: CloudDriver, ctx: Context, job: JobView, *, stop: bool) -> None:
    op = job.operation
    wanted = op.params.get("pool") if op else None
    for pool in [wanted] if wanted else sorted(ctx.spec.pools):
        if stop:
            driver.pools.stop(ctx, pool)
        else:
            driver.pools.start(ctx, pool)
    if not stop:
        push_runtime(driver, ctx, sandbox=job.target.sandbox)  # a scaling group's new VMs get the settings


def scale(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    driver.pools.ensure_vms(ctx)
    _schedules(driver, ctx)  # a Fixed pool's schedule names its instances
    if ctx.infra.LoadBalancerID:
        lb(driver).ensure_backend(ctx)  # registers new Fixed-pool VMs
    push_runtime(driver, ctx, sandbox=job.target.sandbox)  # new VMs get the runtime settings


def rotate(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    op = job.operation
    wanted = op.params.get("pool") if op else None
    for pool in [wanted] if wanted else sorted(ctx.spec.pools):
        ctx.notes.extend(driver.pools.rotate(ctx, pool))
    _schedules(driver, ctx)  # replacements have new instance ids
    push_runtime(driver, ctx, sandbox=job.target.sandbox)  # replacements get the runtime settings
    note_outdated(ctx)


def push(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    # `vmplane push --force`: every running VM, whatever its recorded hash says.
    force = bool(job.operation.params.get("force")) if job.operation and job.operation.kind == "push" else False
    push_runtime(driver, ctx, sandbox=job.target.sandbox, force=force)


def unregister(driver: CloudDriver, ctx: Context, job: JobView) -> None:
    left = driver.inventory.leftovers(ctx)
    if left:
        listed = ", ".join(f"{x.kind} {x.id}" for x in left[:20])
        raise StepFailedError(f"{len(left)} resources tagged with {ctx.job_id} remain: {listed}")
    # Only this job's entry: the same name's job on the other target (sandbox or real) may hold it.
    write(db_url(), lambda s: jobs.unregister_env(s, ctx.spec.org, ctx.spec.name, ctx.job_id))
    ctx.log("nothing tagged with this job remains; removed from the inventory")
