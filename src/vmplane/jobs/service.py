"""The job service: the state transitions of a job (create, teardown, operations, retries).

Functions take a Session and never commit: the caller's unit of work (a CLI command, an API request,
a pipeline step) is the boundary. Side effects such as starting a workflow happen after commit.
The record types and row reads/writes live below in `store/` (the pipeline uses them too); they are
re-exported here because the CLI and the API know jobs through this service.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from vmplane.bootstrap import vmconfig
from vmplane.cost.estimate import estimate
from vmplane.cost.history import new_ledger
from vmplane.envspec.models import EnvSpec, spec_json
from vmplane.state import InfraConfig
from vmplane.store.job_records import (
    ACTIVE,
    JobConflictError,
    JobNotFoundError,
    JobStatus,
    JobView,
    OperationRecord,
    Phase,
    PreconditionFailedError,
    StepRecord,
    StepStatus,
)
from vmplane.store.job_rows import (
    add_operation_notes,
    check_version,
    dump_step,
    find_current_job,
    get_row,
    list_envs,
    list_jobs,
    live_jobs,
    on_sandbox,
    register_env,
    save_infra,
    set_operation_status,
    set_status,
    step_names,
    touch,
    unregister_env,
    update_step,
    view,
)
from vmplane.store.models import JobRow
from vmplane.target import Target

__all__ = [
    "ACTIVE",
    "JobConflictError",
    "JobNotFoundError",
    "JobStatus",
    "JobView",
    "OperationRecord",
    "Phase",
    "PreconditionFailedError",
    "StepRecord",
    "StepStatus",
    "add_operation_notes",
    "begin_operation",
    "begin_teardown",
    "check_version",
    "create_job",
    "find_current_job",
    "get_row",
    "list_envs",
    "list_jobs",
    "live_jobs",
    "on_sandbox",
    "register_env",
    "replace_spec",
    "require_provisioned",
    "save_infra",
    "set_operation_status",
    "set_status",
    "spec_json",
    "step_names",
    "touch",
    "unregister_env",
    "update_step",
    "view",
]


def require_provisioned(job_id: str, status: JobStatus) -> None:
    """An operation needs a provisioned environment that no workflow is changing right now."""
    if status in ACTIVE:
        raise JobConflictError(f"job {job_id} is {status.value}; wait for it to finish (or resume it) first")
    if status in (JobStatus.deleted, JobStatus.delete_failed):
        raise JobConflictError(f"job {job_id} is {status.value}; there is no environment to change")


def new_job_id() -> str:
    return f"job-{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(4)}"


def create_job(session: Session, spec: EnvSpec, target: Target, step_names: list[str]) -> JobRow:
    if (current := find_current_job(session, spec.org, spec.name, target.sandbox)) is not None:
        raise JobConflictError(f"environment {spec.org}/{spec.name} already has job {current.id} ({current.status})")
    row = JobRow(
        id=new_job_id(),
        org=spec.org,
        env_name=spec.name,
        status=JobStatus.pending.value,
        version=1,
        config={
            "spec": spec_json(spec),
            "infra": InfraConfig().model_dump(mode="json"),
            "target": target.model_dump(mode="json"),
            "costEstimate": estimate(spec).to_json(),
            "costLedger": new_ledger(),
            "vmconfig": vmconfig.record(spec),
        },
        steps=[dump_step(StepRecord(name=n)) for n in step_names],
        teardown_steps=[],
    )
    session.add(row)
    session.flush()
    return row


def begin_teardown(session: Session, job_id: str, step_names: list[str], expected_version: int | None = None) -> JobRow:
    row = get_row(session, job_id, for_update=True)
    check_version(row, expected_version)
    if row.status == JobStatus.deleted.value:
        raise JobConflictError(f"job {job_id} is already deleted")
    if row.status in (JobStatus.pending.value, JobStatus.running.value):
        raise JobConflictError(f"job {job_id} is {row.status}; wait for it or resume it before destroying")
    if row.status != JobStatus.deleting.value:
        # A fresh teardown (or a retry after delete_failed) re-runs every step: each is idempotent.
        row.teardown_steps = [dump_step(StepRecord(name=n)) for n in step_names]
    row.status = JobStatus.deleting.value
    row.error = None
    touch(row)
    return row


def new_operation_id() -> str:
    return f"op-{secrets.token_hex(4)}"


def begin_operation(
    session: Session,
    job_id: str,
    kind: str,
    params: dict[str, Any],
    step_names: list[str],
    *,
    spec: EnvSpec | None = None,
    config_updates: dict[str, Any] | None = None,
    expected_version: int | None = None,
) -> OperationRecord:
    """Record a vmOp on a provisioned job; the caller starts its workflow after commit.

    The desired state (`spec`) is written first, as for apply: the op's steps reconcile towards it, and
    a crash leaves the op `running` for `resume` to continue.
    """
    row = get_row(session, job_id, for_update=True)
    check_version(row, expected_version)
    status = JobStatus(row.status)
    require_provisioned(job_id, status)
    previous = row.config.get("operation")
    if status is JobStatus.failed and not previous:
        raise JobConflictError(f"job {job_id} failed while provisioning; resume it (vmplane resume) first")
    op = OperationRecord(
        id=new_operation_id(), kind=kind, params=params, steps=[StepRecord(name=n) for n in step_names]
    )
    history = list(row.config.get("operationHistory", []))
    if previous:
        history = [*history, {k: previous.get(k) for k in ("id", "kind", "params", "status", "error", "finishedAt")}]
    config = {**row.config, **(config_updates or {}), "operation": op.dump(), "operationHistory": history[-50:]}
    if spec is not None:
        config["spec"] = spec_json(spec)
        config["costEstimate"] = estimate(spec).to_json()
    row.config = config
    row.status = JobStatus.pending.value
    row.error = None
    touch(row)
    return op


def replace_spec(session: Session, job_id: str, spec: EnvSpec, step_names: list[str]) -> JobRow:
    """A failed job may take a corrected file: every step runs again (each reconciles what exists)."""
    row = get_row(session, job_id)
    row.config = {
        **row.config,
        "spec": spec_json(spec),
        "costEstimate": estimate(spec).to_json(),
        "vmconfig": vmconfig.record(spec),
    }
    row.steps = [dump_step(StepRecord(name=n)) for n in step_names]
    row.status = JobStatus.pending.value
    touch(row)
    return row
