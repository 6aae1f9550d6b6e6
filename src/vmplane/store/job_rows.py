"""Reads and writes of job and environment rows. Functions take a Session and never commit: the
caller's unit of work (a CLI command, an API request, a pipeline step) is the boundary."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from vmplane.state import InfraConfig
from vmplane.store.job_records import (
    JobNotFoundError,
    JobStatus,
    JobView,
    OperationRecord,
    OperationStatus,
    Phase,
    PreconditionFailedError,
    StepRecord,
    StepStatus,
)
from vmplane.store.models import EnvironmentRow, JobRow
from vmplane.target import Target


def check_version(row: JobRow, expected: int | None) -> None:
    if expected is not None and row.version != expected:
        raise PreconditionFailedError(
            f"job {row.id} is at version {row.version}, not {expected}: it changed since you read it"
        )


def view(row: JobRow) -> JobView:
    return JobView(
        id=row.id,
        org=row.org,
        env=row.env_name,
        status=JobStatus(row.status),
        version=row.version,
        steps=[StepRecord.model_validate(s) for s in row.steps or []],
        teardown_steps=[StepRecord.model_validate(s) for s in row.teardown_steps or []],
        config=row.config,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def get_row(session: Session, job_id: str, *, for_update: bool = False) -> JobRow:
    stmt = select(JobRow).where(JobRow.id == job_id)
    if for_update:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).first()
    if row is None:
        raise JobNotFoundError(f"no job {job_id}")
    return row


def on_sandbox(row: JobRow) -> bool:
    """Whether the job runs on a sandbox (its target has the sandbox's endpoint)."""
    return Target.model_validate(row.config["target"]).sandbox


def live_jobs(session: Session, org: str, env_name: str) -> list[JobRow]:
    """The environment's jobs not deleted yet, newest first: at most one per target kind (real, sandbox)."""
    stmt = (
        select(JobRow)
        .where(JobRow.org == org, JobRow.env_name == env_name, JobRow.status != JobStatus.deleted.value)
        .order_by(JobRow.created_at.desc())
    )
    return list(session.scalars(stmt))


def find_current_job(session: Session, org: str, env_name: str, sandbox: bool | None = None) -> JobRow | None:
    """The environment's job that is not deleted yet on a real cloud (`sandbox=False`) or on the sandbox
    (`True`): the two are different targets, so each has its own. `None`: the newest of either."""
    rows = live_jobs(session, org, env_name)
    return next((r for r in rows if sandbox is None or on_sandbox(r) is sandbox), None)


def list_jobs(
    session: Session, org: str | None = None, limit: int = 100, offset: int = 0, status: JobStatus | None = None
) -> list[JobRow]:
    stmt = select(JobRow).order_by(JobRow.created_at.desc(), JobRow.id).limit(limit).offset(offset)
    if org:
        stmt = stmt.where(JobRow.org == org)
    if status is not None:
        stmt = stmt.where(JobRow.status == status.value)
    return list(session.scalars(stmt))


def dump_step(step: StepRecord) -> dict[str, Any]:
    return step.model_dump(mode="json", by_alias=True)


def touch(row: JobRow) -> None:
    # The version itself is bumped by the ORM on flush (JobRow's version_id_col), conditionally.
    row.updated_at = datetime.now(UTC)


def set_status(session: Session, job_id: str, status: JobStatus, error: str | None = None) -> JobRow:
    row = get_row(session, job_id)
    row.status = status.value
    row.error = error
    touch(row)
    return row


def save_infra(session: Session, job_id: str, infra: InfraConfig, base: dict[str, Any] | None = None) -> None:
    """Write the infra record. With `base` (what the writer read when it started), only the fields it
    changed are written, so steps running side by side never overwrite each other's results."""
    row = get_row(session, job_id, for_update=True)
    mine = infra.model_dump(mode="json")
    merged = mine if base is None else merge_changes(row.config.get("infra", {}), base, mine)
    row.config = {**row.config, "infra": merged}
    touch(row)


def merge_changes(current: dict[str, Any], base: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    """A three-way merge: what `mine` changed since `base`, applied to `current`. Nested records (the
    cloud's sub-model) merge key by key too, since two steps of one wave both write into them."""
    out = dict(current)
    for key in base.keys() - mine.keys():
        out.pop(key, None)
    for key, value in mine.items():
        was = base.get(key)
        if was == value:
            continue
        now = out.get(key)
        if isinstance(value, dict) and isinstance(was, dict) and isinstance(now, dict):
            out[key] = merge_changes(now, was, value)
        else:
            out[key] = value
    return out


def _steps_of(row: JobRow, phase: Phase) -> list[StepRecord]:
    if phase is Phase.operation:
        raw = (row.config.get("operation") or {}).get("steps", [])
    else:
        raw = row.teardown_steps if phase is Phase.teardown else row.steps
    return [StepRecord.model_validate(s) for s in raw or []]


def _set_steps(row: JobRow, phase: Phase, steps: list[StepRecord]) -> None:
    dumped = [dump_step(s) for s in steps]
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
    touch(row)


def step_names(row: JobRow, phase: Phase) -> list[str]:
    return [s.name for s in _steps_of(row, phase)]


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


def unregister_env(session: Session, org: str, name: str, job_id: str | None = None) -> None:
    """Remove the inventory entry; with `job_id`, only if it is that job's (the same name's job on the
    other target, sandbox or real, may hold it)."""
    env = session.scalars(select(EnvironmentRow).where(EnvironmentRow.org == org, EnvironmentRow.name == name)).first()
    if env is not None and (job_id is None or env.job_id == job_id):
        session.delete(env)


def list_envs(session: Session, org: str | None = None) -> list[EnvironmentRow]:
    stmt = select(EnvironmentRow).order_by(EnvironmentRow.org, EnvironmentRow.name)
    if org:
        stmt = stmt.where(EnvironmentRow.org == org)
    return list(session.scalars(stmt))


def set_operation_status(session: Session, job_id: str, status: OperationStatus, *, error: str | None = None) -> None:
    row = get_row(session, job_id, for_update=True)
    op = OperationRecord.model_validate(row.config["operation"])
    now = datetime.now(UTC)
    op.status, op.error = status, error
    if status is OperationStatus.running:
        op.started_at = op.started_at or now
    else:
        op.finished_at = now
    row.config = {**row.config, "operation": op.dump()}
    touch(row)


def add_operation_notes(session: Session, job_id: str, notes: list[str]) -> None:
    row = get_row(session, job_id, for_update=True)
    op = dict(row.config["operation"])
    op["notes"] = [*op.get("notes", []), *notes]
    row.config = {**row.config, "operation": op}
    touch(row)


def next_workflow_attempt(session: Session, job_id: str, kind: str) -> int:
    """Record that a new workflow run of `kind` starts; returns its attempt number (1-based)."""
    row = get_row(session, job_id)
    attempts = dict(row.config.get("attempts", {}))
    attempts[kind] = int(attempts.get(kind, 0)) + 1
    row.config = {**row.config, "attempts": attempts}
    touch(row)
    return int(attempts[kind])


def current_attempt(row: JobRow, kind: str) -> int:
    return int(row.config.get("attempts", {}).get(kind, 0))
