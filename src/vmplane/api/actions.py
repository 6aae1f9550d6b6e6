"""The decisions behind the API's POST, PATCH and DELETE, shared with the dashboard so both take the same path.

`plan_vm_op` turns one typed vmOp body into the operation planner's answer and the impact it reports;
`read_drift` reads an environment's drift as `vmplane drift` does (a `repair` vmOp repairs it);
`create` records a new environment's job (the sandbox flag honoured as in `POST /provisioning-jobs`),
`destroy` its teardown as `DELETE` does (or forgets a job that created nothing).
None starts a workflow: the caller does, after the commit.
"""

from __future__ import annotations

from vmplane.api.schemas import AttachLb, DetachLb, Push, Repair, Rotate, Scale, Start, Stop
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.registry import driver_for
from vmplane.clouds.registry import sandbox_endpoint as registry_endpoint
from vmplane.envspec.base import Cloud
from vmplane.envspec.impact import CONSEQUENCE, Impact
from vmplane.envspec.models import EnvSpec
from vmplane.jobs import drift, operations
from vmplane.jobs.drift import DriftReport
from vmplane.jobs.forget import forget, forgettable
from vmplane.jobs.operations import ApplyPlan, Decision, OperationError, OperationPlan
from vmplane.jobs.service import JobConflictError, JobStatus, JobView, PreconditionFailedError
from vmplane.observe import logs
from vmplane.settings import Settings
from vmplane.target import Target

_log = logs.get(__name__)
VmOp = AttachLb | DetachLb | Scale | Rotate | Stop | Start | Repair | Push


def plan_vm_op(
    job: JobView, body: VmOp, expected_version: int | None = None
) -> tuple[OperationPlan, list[dict[str, str]]]:
    """The operation a vmOp body asks for on `job` (raises the planner's domain error when it cannot be
    done), and the impact of each part of the spec it touches. `expected_version` (If-Match) is checked
    here only before a read of the cloud (a repair); `begin_operation` checks it for every vmOp."""
    if isinstance(body, Repair):
        return plan_repair(job, expected_version)
    if isinstance(body, AttachLb):
        return operations.plan_attach_lb(job, body.load_balancer), [_impact("loadBalancer", Impact.cloud)]
    if isinstance(body, DetachLb):
        return operations.plan_detach_lb(job), [_impact("loadBalancer", Impact.cloud)]
    if isinstance(body, Scale):
        op = operations.plan_scale(job, body.pool, min_size=body.min, max_size=body.max, desired=body.desired)
        return op, [_impact(f"pools.{body.pool}", Impact.cloud)]
    if isinstance(body, Stop | Start):
        plan_power = operations.plan_stop if isinstance(body, Stop) else operations.plan_start
        return plan_power(job, body.pool), [_impact(f"pools.{body.pool or '*'}", Impact.cloud)]
    if isinstance(body, Push):
        return operations.plan_push(job, force=body.force), [_impact("runtime", Impact.runtime)]
    op = operations.plan_rotate(job, body.pool)
    return op, [{"path": f"pools.{body.pool or '*'}", "impact": "vm", "consequence": "outdated VMs replaced"}]


def read_drift(job: JobView) -> DriftReport:
    """The job's drift, read from the cloud (`jobs.drift.check`: nothing is written). A cloud whose driver
    reads none (the Azure stub) is refused as the request's fault (OperationError, 422) whatever the job's
    state; a job not at rest is a conflict (409); a cloud that cannot be read raises its CloudError (the
    route answers 502)."""
    try:
        driver = driver_for(job.target)
    except UnsupportedError as err:  # no driver at all for this target (the sandbox's Proxmox)
        raise OperationError(str(err)) from None
    if not driver.capabilities.drift:
        raise OperationError(str(driver.unsupported("drift detection")))
    return drift.check(job)


def plan_repair(job: JobView, expected_version: int | None = None) -> tuple[OperationPlan, list[dict[str, str]]]:
    """The `repair` operation for what drifted now, and each repaired resource as its impact. Nothing to
    repair (no drift, or only the user's resources) is a conflict: there is no operation to record."""
    if expected_version is not None and expected_version != job.version:  # before the cloud is read
        raise PreconditionFailedError(
            f"job {job.id} is at version {job.version}, not {expected_version}: it changed since you read it"
        )
    report = read_drift(job)
    if not report.repairable:
        why = (
            f"{len(report.drift)} drifted resource(s), all reported only (not vmplane's)"
            if report.drift
            else "no drift: the cloud matches the file as last applied"
        )
        raise JobConflictError(f"nothing to repair in {job.env} ({job.id}): {why}")
    impact = [{"path": d.resource, "impact": "cloud", "consequence": d.repair} for d in report.repairable]
    return drift.plan_repair(job, report), impact


def create(settings: Settings, spec: EnvSpec, *, sandbox: bool, planned: ApplyPlan | None = None) -> str:
    """Record a new environment's job and return its id; an environment that already has a job is a
    conflict (update it or delete it first). The caller checks the org and starts the workflow.
    `planned`: the plan the caller just made for the same spec and target (the dashboard's check), so the
    cloud's read-only checks are not asked twice in one request."""
    endpoint = sandbox_endpoint(settings, spec.provider.cloud) if sandbox else None
    target = Target.for_spec(spec, endpoint)
    # The fetch's progress goes to the server log.
    # No refresh: only a new job is created here, so an existing one's drift is not read (it is a conflict).
    ap = planned if planned is not None else operations.plan_apply(settings, spec, target, say=_log.info, refresh=False)
    if ap.decision is not Decision.new:
        raise JobConflictError(
            f"environment {spec.org}/{spec.name} already has job {ap.job.id if ap.job else '?'}; "
            "PATCH it (vmOp update) or DELETE it first"
        )
    return operations.create_or_update_job(settings, spec, target, ap)


def destroy(settings: Settings, job: JobView, expected_version: int | None = None) -> bool:
    """Record the job's teardown (the caller starts it, unless this returns True: the job created nothing
    in the cloud, so it is forgotten at once, `deleted` with no cloud call). A job already being or been
    destroyed is a conflict, as is one whose workflow still runs."""
    if job.status in (JobStatus.deleting, JobStatus.deleted):
        raise JobConflictError(f"job {job.id} is already {job.status.value}")
    if forgettable(job):
        forget(settings, job, expected_version)
        return True
    operations.begin_destroy(settings, job.id, expected_version)
    return False


def sandbox_endpoint(settings: Settings, cloud: Cloud) -> str:
    """The sandbox's endpoint for the spec's cloud (AWS's for a cloud it does not emulate: that
    cloud's driver then refuses with its own answer, as before)."""
    from vmplane.sandbox import control

    info = control.start(settings)
    return registry_endpoint(cloud, info)


def _impact(path: str, impact: Impact) -> dict[str, str]:
    return {"path": path, "impact": impact.value, "consequence": CONSEQUENCE[impact]}
