"""What `apply` and `destroy` of a file mean for the environment's current job: a new job, a resume,
an update classified by impact, a refusal. Decided and recorded here; the workflow starts after commit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from vmplane.bootstrap import vmconfig, vmconfig_fetch
from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import ProviderInvalidError
from vmplane.clouds.registry import driver_for
from vmplane.cost.delta import plan_cost
from vmplane.envspec.impact import CONSEQUENCE, Change, Impact, diff
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.percloud import current_shape
from vmplane.errors import UsageError
from vmplane.jobs import drift, precheck, secret_push
from vmplane.jobs import service as jobs
from vmplane.jobs.poolsizes import scaled_notes, size_resources
from vmplane.jobs.service import JobConflictError, JobStatus, JobView, OperationRecord, Phase
from vmplane.jobs.vmops import OperationPlan
from vmplane.pipeline.plan import TEARDOWN_STEPS, Plan, PlanKind, provision_plan, provision_steps, teardown_plan
from vmplane.settings import Settings
from vmplane.state import InfraConfig
from vmplane.store.db import transaction
from vmplane.store.job_records import OperationStatus
from vmplane.target import Target


class UnsupportedSpecError(UsageError):
    """The file asks what the provider's driver cannot do (an `asg` pool on Proxmox VE, ...): refused before
    any job exists (exit 2, HTTP 422), each problem naming its field."""


def refuse_unsupported(driver: CloudDriver, spec: EnvSpec) -> None:
    """The driver's capability check (what stepValidate runs first), here so a request bound to fail creates
    nothing. A provider that answers `Invalid` to everything (the Azure stub) is left to its job, which
    records that answer."""
    try:
        problems = driver.validate(spec)
    except ProviderInvalidError:
        return
    if problems:
        raise UnsupportedSpecError(
            f"{spec.provider.cloud.value} cannot run this file; nothing was created: " + "; ".join(problems)
        )


class Decision(StrEnum):
    new = "new"  # no job yet: create one
    resume = "resume"  # an unfinished or failed job for the same file: continue it
    retry_with_changes = "retry_with_changes"  # a failed job, corrected file: re-run every step
    no_changes = "no_changes"  # applied and identical
    update = "update"  # applied and different, every change can be made in place: an `update` operation
    refused = "refused"  # applied and different, and some change cannot be made in place
    repair = "repair"  # applied and identical, but the cloud drifted from it: a `repair` operation


@dataclass
class ApplyPlan:
    decision: Decision
    plan: Plan
    job: JobView | None
    changes: list[Change] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    repair: OperationPlan | None = None  # Decision.repair: the operation to record

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "decision": self.decision.value,
            "job": self.job.id if self.job else None,
            "changes": [{**c.to_json(), "consequence": CONSEQUENCE[c.impact]} for c in self.changes],
            "refusals": self.refusals,
        }


def plan_apply(
    settings: Settings,
    spec: EnvSpec,
    target: Target,
    *,
    say: Callable[[str], None] = lambda _m: None,
    refresh: bool = True,
) -> ApplyPlan:
    """What applying `spec` means. `refresh`: an applied environment's cloud is read first (`jobs.drift`),
    and what drifted is repaired by the apply (its own plan lines); False compares the file with the
    record only."""
    with transaction(settings.db_url) as s:
        row = jobs.find_current_job(s, spec.org, spec.name, target.sandbox)  # real and sandbox: two targets
        job = jobs.view(row) if row is not None else None
    driver = driver_for(target)
    refuse_unsupported(driver, spec)
    fresh = provision_plan(driver, spec, InfraConfig(), target.describe())
    if not target.sandbox:  # nothing boots on the sandbox: no fetch, it stays offline (notes instead)
        vmconfig_fetch.refuse_unpinned(spec, settings.home, say)  # before any job: UnpinnedError, exit 2
    fresh.notes.extend(unpinned_notes(spec, target, settings.home))  # the cache the fetch wrote
    if job is None:
        return precheck.checked(ApplyPlan(Decision.new, fresh, None), driver, spec, target, say)
    same = current_shape(job.config["spec"]) == jobs.spec_json(spec) and not manifest_changes(job, spec)
    if job.status in (JobStatus.deleting, JobStatus.delete_failed):
        raise JobConflictError(
            f"environment {spec.name} is being destroyed by {job.id} ({job.status}); finish that first"
        )
    failed_op = job.operation if job.status is JobStatus.failed and job.operation is not None else None
    if failed_op is not None and same:
        raise JobConflictError(
            f"the last operation on {job.env} ({failed_op.kind}) failed: {failed_op.error}; "
            f"`vmplane resume {job.id}` retries it, or apply a corrected file"
        )
    if job.status is JobStatus.succeeded or failed_op is not None:
        report = drift.check(job) if refresh and drift.checkable(job) and job.target == target else None
        if same:
            # The file as applied, but a secret it references has a new version the VMs lack: a runtime update.
            if due := secret_push.version_changes(job, spec):
                return _classified_update(spec, target, job, report, due)
            if report is not None and report.drift:
                op = drift.plan_repair(job, report)
                return ApplyPlan(Decision.repair, op.plan, job, repair=op)
            return ApplyPlan(Decision.no_changes, Plan(PlanKind.none, spec.name, target.describe(), []), job)
        return _classified_update(spec, target, job, report)
    if job.target != target:
        raise JobConflictError(f"job {job.id} runs on {job.target.describe()}, not {target.describe()}")
    if (unfinished := job.operation) is not None and resume_phase(job) is Phase.operation:
        # An operation killed before it ended (its job `running`, the operation too): continue it. Running
        # provisioning instead found every step done and left the operation `running` for good.
        if not same:
            raise JobConflictError(
                f"the {unfinished.kind} operation on {job.env} did not finish; `vmplane resume {job.id}` continues it, "
                "then apply the changed file"
            )
        left = [s.name for s in unfinished.steps if s.status != jobs.StepStatus.succeeded]
        fresh.notes.insert(
            0, f"continues the {unfinished.kind} operation of job {job.id} at {left[0] if left else 'its end'}"
        )
        return ApplyPlan(Decision.resume, fresh, job)
    remaining = [s.name for s in job.steps if s.status != jobs.StepStatus.succeeded]
    fresh.notes.insert(0, f"continues job {job.id} ({job.status}) at {remaining[0] if remaining else 'its end'}")
    if job.status is JobStatus.failed and not same:
        return precheck.checked(ApplyPlan(Decision.retry_with_changes, fresh, job), driver, spec, target, say)
    return ApplyPlan(Decision.resume, fresh, job)


def plan_update(spec: EnvSpec, target: Target, job: JobView, *, refresh: bool = True) -> ApplyPlan:
    """An applied environment and a changed file: every change classified by its impact (and, with
    `refresh`, what drifted in the cloud repaired first)."""
    refuse_unsupported(driver_for(target), spec)
    report = drift.check(job) if refresh and drift.checkable(job) and job.target == target else None
    return _classified_update(spec, target, job, report)


def _classified_update(
    spec: EnvSpec,
    target: Target,
    job: JobView,
    report: drift.DriftReport | None = None,
    due: list[Change] | None = None,
) -> ApplyPlan:
    """plan_update once the file passed the driver's capability check (plan_apply ran it already).
    `report`: the cloud's drift, repaired by the update's first steps. `due`: the secrets' new versions
    (`secret_push.version_changes`), when the caller has read them already."""
    changes = diff(current_shape(job.config["spec"]), jobs.spec_json(spec)) + manifest_changes(job, spec)
    regrant = secret_push.references_changed(changes)  # the file's own changes, before the versions
    seen = {c.path for c in changes}
    due = secret_push.version_changes(job, spec) if due is None else due
    # A reference the file changed is in the diff already: its new version is delivered with it.
    changes += [c for c in due if c.path not in seen and c.path.removesuffix(".secret") not in seen]
    refusals: list[str] = []
    for c in changes:
        if c.impact is Impact.identity:
            refusals.append(f"{c.path}: {CONSEQUENCE[c.impact]}")
        elif c.path == "loadBalancer":
            verb = "attach" if c.new is not None else "detach"
            refusals.append(f"loadBalancer: use `vmplane lb {verb} {spec.name}` to {verb} the load balancer")
        elif c.path.startswith("pools.") and c.path.count(".") == 1 and c.new is None:
            refusals.append(f"{c.path}: removing a pool in place is not supported; set its size to 0 or destroy")
    if job.target != target:
        refusals.append(f"the job runs on {job.target.describe()}, not {target.describe()}")
    if changes and all(c.impact is Impact.runtime for c in changes):
        steps = ["stepPushRuntime", "stepRegisterSpace"]  # nothing else to reconcile
        if regrant:  # checked, then the VMs' read access made to match the references, before the push
            steps = ["stepValidate", "stepCreateIAM", *steps]
    else:
        steps = provision_steps(spec)  # stepFinalize pushes runtime changes among the others
    if any(c.path == "tags" or c.path.startswith("tags.") for c in changes):
        steps.insert(steps.index("stepRegisterSpace"), "stepUpdateTags")
    if report is not None and report.repairable:
        steps = drift.with_repair(steps if "stepValidate" in steps else provision_steps(spec))
    counts = Counter(c.impact.value for c in changes)
    headline = "Update: " + ", ".join(f"{n} {impact}" for impact, n in sorted(counts.items())) + " change(s)."
    # The VMs a size change launches or terminates are resource lines, so a smaller pool reads as destruction.
    resources = size_resources(driver_for(job.target), job.spec, spec, job.infra)
    plan = Plan(PlanKind.update, spec.name, target.describe(), steps, resources, headline=headline)
    plan.changed_fields = len(changes)
    plan.notes.append(f"updates job {job.id}: every step reconciles the environment with the file")
    plan.notes.extend(scaled_notes(job, spec))
    plan.notes.extend(unpinned_notes(spec, target))
    plan.cost = plan_cost(job.spec, spec)
    if report is not None:
        plan.repairs = list(report.drift)
    return ApplyPlan(Decision.refused if refusals else Decision.update, plan, job, changes, refusals)


def unpinned_notes(spec: EnvSpec, target: Target, home: Path | None = None) -> list[str]:
    """What stepValidate will say of unpinned vmconfig artifacts: a warning on the sandbox, a refusal elsewhere.
    `home`: the cache the fetch just used (default: the process's)."""
    if target.sandbox:
        return vmconfig.sandbox_notes(spec, home)
    return [f"stepValidate will refuse: {p}" for p in vmconfig.problems(spec, home)]


def manifest_changes(job: JobView, spec: EnvSpec) -> list[Change]:
    """The pools' current vmconfig manifests against those recorded at the last apply, one `vm` change
    per manifest file (`vmconfig.<kind>.<arch>`). A job recorded before manifests existed shows none."""
    before: dict[str, dict[str, str]] = job.config.get("vmconfig") or {}
    if not before:
        return []
    changed: dict[str, tuple[str | None, str]] = {}
    for pool, now in vmconfig.record(spec).items():
        old = before.get(pool)
        # A pool moved to another file (bootstrap.mode, arch) shows as that field's change already.
        same = old is not None and vmconfig.same_manifest(spec, pool, old["digest"], now["digest"])
        if old is not None and old["file"] == now["file"] and not same:
            path = "vmconfig." + now["file"].removeprefix("vmplane.env.vmconfig.").removesuffix(".json")
            changed[path] = (old["digest"][:12], now["digest"][:12])
    return [Change(path, old, new, Impact.vm) for path, (old, new) in sorted(changed.items())]


def begin_update(
    settings: Settings, job: JobView, spec: EnvSpec, ap: ApplyPlan, expected_version: int | None = None
) -> OperationRecord:
    params = {"changes": [c.path for c in ap.changes]}
    with transaction(settings.db_url) as s:
        return jobs.begin_operation(
            s,
            job.id,
            "update",
            params,
            ap.plan.steps,
            spec=spec,
            config_updates={"vmconfig": vmconfig.record(spec)},  # what the update's launch templates render
            expected_version=expected_version,
        )


def create_or_update_job(settings: Settings, spec: EnvSpec, target: Target, ap: ApplyPlan) -> str:
    steps = provision_steps(spec)
    with transaction(settings.db_url) as s:
        if ap.decision is Decision.new:
            return jobs.create_job(s, spec, target, steps).id
        assert ap.job is not None
        if ap.decision is Decision.retry_with_changes:
            jobs.replace_spec(s, ap.job.id, spec, steps)
        return ap.job.id


def plan_destroy(settings: Settings, job: JobView) -> Plan:
    return teardown_plan(driver_for(job.target), job.spec, job.infra, job.target.describe())


def resume_phase(job: JobView) -> Phase | None:
    """What `resume` continues: a teardown, an unfinished operation, or provisioning; None if nothing."""
    if job.status in (JobStatus.deleting, JobStatus.delete_failed):
        return Phase.teardown
    op = job.operation
    if job.status is not JobStatus.deleted and op is not None and op.status is not OperationStatus.succeeded:
        return Phase.operation
    if job.status in (JobStatus.succeeded, JobStatus.deleted):
        return None
    return Phase.provision


def begin_destroy(settings: Settings, job_id: str, expected_version: int | None = None) -> None:
    with transaction(settings.db_url) as s:
        jobs.begin_teardown(s, job_id, list(TEARDOWN_STEPS), expected_version)
