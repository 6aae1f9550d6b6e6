"""The job service: create, read, update and list provisioning jobs and the environment inventory.

Functions take a Session and never commit: the caller's unit of work (a CLI command, an API request,
a pipeline step) is the boundary. Side effects such as starting a workflow happen after commit.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from vmplane.clouds.registry import Target
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig
from vmplane.store.models import EnvironmentRow, JobRow


class JobStatus(StrEnum):
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    deleting = "deleting"
    deleted = "deleted"
    delete_failed = "delete_failed"


ACTIVE = {JobStatus.pending, JobStatus.running, JobStatus.deleting}
GONE = {JobStatus.deleted}


class StepStatus(StrEnum):
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    skipped = "skipped"


class Phase(StrEnum):
    """Which step list of a job a workflow runs: provisioning, teardown, or an operation (vmOp)."""

    provision = "provision"
    teardown = "teardown"
    operation = "operation"


class StepRecord(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str
    status: StepStatus = StepStatus.pending
    started_at: datetime | None = Field(default=None, alias="startedAt")
    finished_at: datetime | None = Field(default=None, alias="finishedAt")
    error: str | None = None
    api_calls: dict[str, int] = Field(default_factory=dict, alias="apiCalls")
    log: list[str] = Field(default_factory=list)


class OperationRecord(BaseModel):
    """A vmOp on an existing job (attach_lb, detach_lb, scale, rotate, update), with its own steps."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    status: str = "pending"  # pending | running | succeeded | failed
    steps: list[StepRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
    started_at: datetime | None = Field(default=None, alias="startedAt")
    finished_at: datetime | None = Field(default=None, alias="finishedAt")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class JobView(BaseModel):
    """The public shape of a job (CLI `--output json`, later the REST API)."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    org: str
    env: str
    status: JobStatus
    version: int
    steps: list[StepRecord]
    teardown_steps: list[StepRecord] = Field(alias="teardownSteps")
    config: dict[str, Any]
    error: str | None
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec.model_validate(self.config["spec"])

    @property
    def infra(self) -> InfraConfig:
        return InfraConfig.model_validate(self.config.get("infra", {}))

    @property
    def target(self) -> Target:
        return Target.model_validate(self.config["target"])

    @property
    def operation(self) -> OperationRecord | None:
        op = self.config.get("operation")
        return OperationRecord.model_validate(op) if op else None

    def steps_of(self, phase: Phase) -> list[StepRecord]:
        if phase is Phase.operation:
            op = self.operation
            return op.steps if op else []
        return self.teardown_steps if phase is Phase.teardown else self.steps

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class JobNotFoundError(LookupError):
    pass


class JobConflictError(RuntimeError):
    """The job's state forbids the operation (e.g. an active job for the same environment)."""


class PreconditionFailedError(RuntimeError):
    """The caller's `If-Match` version is not the job's current version (someone else wrote it)."""


def check_version(row: JobRow, expected: int | None) -> None:
    if expected is not None and row.version != expected:
        raise PreconditionFailedError(
            f"job {row.id} is at version {row.version}, not {expected}: it changed since you read it"
        )


def new_job_id() -> str:
    return f"job-{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(4)}"


def spec_json(spec: EnvSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def view(row: JobRow) -> JobView:
    return JobView(
        id=row.id,
        org=row.org,
        env=row.env_name,
        status=JobStatus(row.status),
        version=row.version,
        steps=[StepRecord.model_validate(s) for s in row.steps or []],
        teardownSteps=[StepRecord.model_validate(s) for s in row.teardown_steps or []],
        config=row.config,
        error=row.error,
        createdAt=row.created_at,
        updatedAt=row.updated_at,
    )


def create_job(session: Session, spec: EnvSpec, target: Target, step_names: list[str]) -> JobRow:
    if (current := find_current_job(session, spec.org, spec.name)) is not None:
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
        },
        steps=[_dump(StepRecord(name=n)) for n in step_names],
        teardown_steps=[],
    )
    session.add(row)
    session.flush()
    return row


def get_row(session: Session, job_id: str, *, for_update: bool = False) -> JobRow:
    stmt = select(JobRow).where(JobRow.id == job_id)
    if for_update:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).first()
    if row is None:
        raise JobNotFoundError(f"no job {job_id}")
    return row


def find_current_job(session: Session, org: str, env_name: str) -> JobRow | None:
    """The environment's job that is not deleted yet (at most one)."""
    stmt = (
        select(JobRow)
        .where(JobRow.org == org, JobRow.env_name == env_name, JobRow.status != JobStatus.deleted.value)
        .order_by(JobRow.created_at.desc())
    )
    return session.scalars(stmt).first()


def list_jobs(
    session: Session, org: str | None = None, limit: int = 100, offset: int = 0, status: JobStatus | None = None
) -> list[JobRow]:
    stmt = select(JobRow).order_by(JobRow.created_at.desc(), JobRow.id).limit(limit).offset(offset)
    if org:
        stmt = stmt.where(JobRow.org == org)
    if status is not None:
        stmt = stmt.where(JobRow.status == status.value)
    return list(session.scalars(stmt))


def _dump(step: StepRecord) -> dict[str, Any]:
    return step.model_dump(mode="json", by_alias=True)


def _touch(row: JobRow) -> None:
    # The version itself is bumped by the ORM on flush (JobRow's version_id_col), conditionally.
    row.updated_at = datetime.now(UTC)


def set_status(session: Session, job_id: str, status: JobStatus, error: str | None = None) -> JobRow:
    row = get_row(session, job_id)
    row.status = status.value
    row.error = error
    _touch(row)
    return row


def save_infra(session: Session, job_id: str, infra: InfraConfig, base: dict[str, Any] | None = None) -> None:
    """Write the infra record. With `base` (what the writer read when it started), only the fields it
    changed are written, so steps running side by side never overwrite each other's results."""
    row = get_row(session, job_id, for_update=True)
    mine = infra.model_dump(mode="json")
    if base is None:
        merged = mine
    else:
        merged = dict(row.config.get("infra", {}))
        merged.update({k: v for k, v in mine.items() if base.get(k) != v})
    row.config = {**row.config, "infra": merged}
    _touch(row)


def _steps_of(row: JobRow, phase: Phase) -> list[StepRecord]:
    if phase is Phase.operation:
        raw = (row.config.get("operation") or {}).get("steps", [])
    else:
        raw = row.teardown_steps if phase is Phase.teardown else row.steps
    return [StepRecord.model_validate(s) for s in raw or []]


def _set_steps(row: JobRow, phase: Phase, steps: list[StepRecord]) -> None:
    dumped = [_dump(s) for s in steps]
    if phase is Phase.operation:
        row.config = {**row.config, "operation": {**row.config["operation"], "steps": dumped}}
    elif phase is Phase.teardown:
        row.teardown_steps = dumped
    else:
        row.steps = dumped


def update_step(
    session: Session,
    job_id: str,
    name: str,
    *,
    phase: Phase = Phase.provision,
    status: StepStatus,
    error: str | None = None,
    api_calls: dict[str, int] | None = None,
    log: list[str] | None = None,
) -> None:
    row = get_row(session, job_id, for_update=True)
    steps = _steps_of(row, phase)
    step = next((s for s in steps if s.name == name), None)
    if step is None:
        step = StepRecord(name=name)
        steps.append(step)
    now = datetime.now(UTC)
    if status is StepStatus.running:
        step.started_at, step.finished_at, step.error = now, None, None
    elif status in (StepStatus.succeeded, StepStatus.failed, StepStatus.skipped):
        step.finished_at = now
    step.status = status
    if error is not None:
        step.error = error
    if api_calls is not None:
        step.api_calls = dict(sorted(api_calls.items()))
    if log is not None:
        step.log = log
    _set_steps(row, phase, steps)
    _touch(row)


def step_names(row: JobRow, phase: Phase) -> list[str]:
    return [s.name for s in _steps_of(row, phase)]


def begin_teardown(session: Session, job_id: str, step_names: list[str], expected_version: int | None = None) -> JobRow:
    row = get_row(session, job_id, for_update=True)
    check_version(row, expected_version)
    if row.status == JobStatus.deleted.value:
        raise JobConflictError(f"job {job_id} is already deleted")
    if row.status in (JobStatus.pending.value, JobStatus.running.value):
        raise JobConflictError(f"job {job_id} is {row.status}; wait for it or resume it before destroying")
    if row.status != JobStatus.deleting.value:
        # A fresh teardown (or a retry after delete_failed) re-runs every step: each is idempotent.
        row.teardown_steps = [_dump(StepRecord(name=n)) for n in step_names]
    row.status = JobStatus.deleting.value
    row.error = None
    _touch(row)
    return row


def register_env(session: Session, row: JobRow, outputs: dict[str, Any]) -> None:
    env = session.scalars(
        select(EnvironmentRow).where(EnvironmentRow.org == row.org, EnvironmentRow.name == row.env_name)
    ).first()
    target = Target.model_validate(row.config["target"])
    if env is None:
        env = EnvironmentRow(
            org=row.org, name=row.env_name, job_id=row.id, cloud=target.cloud.value, region=target.region
        )
        session.add(env)
    env.job_id, env.outputs = row.id, outputs
    session.flush()


def unregister_env(session: Session, org: str, name: str) -> None:
    env = session.scalars(select(EnvironmentRow).where(EnvironmentRow.org == org, EnvironmentRow.name == name)).first()
    if env is not None:
        session.delete(env)


def list_envs(session: Session, org: str | None = None) -> list[EnvironmentRow]:
    stmt = select(EnvironmentRow).order_by(EnvironmentRow.org, EnvironmentRow.name)
    if org:
        stmt = stmt.where(EnvironmentRow.org == org)
    return list(session.scalars(stmt))


def next_workflow_attempt(session: Session, job_id: str, kind: str) -> int:
    """Record that a new workflow run of `kind` starts; returns its attempt number (1-based)."""
    row = get_row(session, job_id)
    attempts = dict(row.config.get("attempts", {}))
    attempts[kind] = int(attempts.get(kind, 0)) + 1
    row.config = {**row.config, "attempts": attempts}
    _touch(row)
    return attempts[kind]


def current_attempt(row: JobRow, kind: str) -> int:
    return int(row.config.get("attempts", {}).get(kind, 0))


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
    if status in ACTIVE:
        raise JobConflictError(f"job {job_id} is {status.value}; wait for it to finish (or resume it) first")
    if status in (JobStatus.deleted, JobStatus.delete_failed):
        raise JobConflictError(f"job {job_id} is {status.value}; there is no environment to change")
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
    row.config = config
    row.status = JobStatus.pending.value
    row.error = None
    _touch(row)
    return op


def set_operation_status(session: Session, job_id: str, status: str, *, error: str | None = None) -> None:
    row = get_row(session, job_id, for_update=True)
    op = OperationRecord.model_validate(row.config["operation"])
    now = datetime.now(UTC)
    op.status, op.error = status, error
    if status == "running":
        op.started_at = op.started_at or now
    else:
        op.finished_at = now
    row.config = {**row.config, "operation": op.dump()}
    _touch(row)


def add_operation_notes(session: Session, job_id: str, notes: list[str]) -> None:
    row = get_row(session, job_id, for_update=True)
    op = dict(row.config["operation"])
    op["notes"] = [*op.get("notes", []), *notes]
    row.config = {**row.config, "operation": op}
    _touch(row)


def replace_spec(session: Session, job_id: str, spec: EnvSpec, step_names: list[str]) -> JobRow:
    """A failed job may take a corrected file: every step runs again (each reconciles what exists)."""
    row = get_row(session, job_id)
    row.config = {**row.config, "spec": spec_json(spec)}
    row.steps = [_dump(StepRecord(name=n)) for n in step_names]
    row.status = JobStatus.pending.value
    _touch(row)
    return row
