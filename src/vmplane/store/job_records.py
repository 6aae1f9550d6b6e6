"""The job record's types: statuses, steps, operations and the public view of a job.

They sit below the job service and the pipeline, which both read and write job rows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from vmplane.errors import NotFoundInStoreError, StalePreconditionError, StateConflictError
from vmplane.state import InfraConfig
from vmplane.target import Target

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec


class JobStatus(StrEnum):
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    deleting = "deleting"
    deleted = "deleted"
    delete_failed = "delete_failed"


ACTIVE = {JobStatus.pending, JobStatus.running, JobStatus.deleting}


class StepStatus(StrEnum):
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    skipped = "skipped"


class OperationStatus(StrEnum):
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"


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
    status: OperationStatus = OperationStatus.pending
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
        # Imported here: listing jobs needs no spec model, and building it costs start-up time.
        from vmplane.envspec.models import EnvSpec

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
        # The estimate of the spec as recorded (jobs.service writes it with the spec); null on older jobs.
        return {**self.model_dump(mode="json", by_alias=True), "costEstimate": self.config.get("costEstimate")}


class JobNotFoundError(NotFoundInStoreError):
    pass


class JobConflictError(StateConflictError):
    """The job's state forbids the operation (e.g. an active job for the same environment)."""


class PreconditionFailedError(StalePreconditionError):
    """The caller's `If-Match` version is not the job's current version (someone else wrote it)."""
