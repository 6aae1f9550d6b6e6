"""Request bodies of the provisioning API. `PATCH` takes one typed `vmOp` (the discriminator) per
request instead of a route per operation."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vmplane.clouds.drift import DriftChange
from vmplane.envspec.models import LoadBalancer
from vmplane.jobs.tokens import Role


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AttachLb(_Op):
    vm_op: Literal["attach_lb"] = Field(alias="vmOp")
    load_balancer: LoadBalancer | None = Field(
        default=None, alias="loadBalancer", description="Default: the block the job had before `detach_lb`."
    )


class DetachLb(_Op):
    vm_op: Literal["detach_lb"] = Field(alias="vmOp")


class Scale(_Op):
    vm_op: Literal["scale"] = Field(alias="vmOp")
    pool: str
    min: int | None = Field(default=None, ge=0, le=1000)
    max: int | None = Field(default=None, ge=1, le=1000)
    desired: int | None = Field(default=None, ge=0, le=1000)


class Rotate(_Op):
    vm_op: Literal["rotate"] = Field(alias="vmOp")
    pool: str | None = None


class Stop(_Op):
    """Stop a pool (or every pool) now: Fixed VMs stopped with their disks, an auto-scaling group at 0."""

    vm_op: Literal["stop"] = Field(alias="vmOp")
    pool: str | None = None


class Start(_Op):
    """Start a stopped pool (or every pool) now and wait until its VMs are ready."""

    vm_op: Literal["start"] = Field(alias="vmOp")
    pool: str | None = None


class Repair(_Op):
    """Make the cloud match the file as last applied again (what `GET .../drift` lists): stepRepairDrift,
    then every provisioning step reconciles. 409 when nothing drifted that vmplane may repair."""

    vm_op: Literal["repair"] = Field(alias="vmOp")


class Push(_Op):
    """Push the runtime settings again: the referenced secrets' versions are read (metadata only) and every
    running VM whose settings or versions differ gets them (`force`: every running VM); nothing is replaced."""

    vm_op: Literal["push"] = Field(alias="vmOp")
    force: bool = False


class Update(_Op):
    """A partial update of the spec (JSON merge patch: a null removes a key): user-data, image, security
    group ports, runtime settings, sizes... Answered with the impact of each changed field."""

    vm_op: Literal["update"] = Field(alias="vmOp")
    spec: dict[str, Any]


PatchBody = Annotated[
    AttachLb | DetachLb | Scale | Rotate | Stop | Start | Repair | Push | Update, Field(discriminator="vm_op")
]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class ErrorMessage(BaseModel):
    """A refusal: `message` says why; some carry more (refusals and impact of an update)."""

    model_config = ConfigDict(extra="allow")
    message: str


class ValidationIssue(BaseModel):
    model_config = ConfigDict(extra="allow")
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error answer: one message, or (422 on an invalid body or query) the list of field issues."""

    detail: ErrorMessage | list[ValidationIssue]


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Role.operator


class DriftField(BaseModel):
    """One field that differs: what the file and the record want, and what the cloud holds (JSON values)."""

    field: str
    wanted: Any
    actual: Any


class DriftedResource(BaseModel):
    """One resource that differs from the file as last applied (`vmplane drift -o json`'s items)."""

    resource: str = Field(description="Its plan address, `<terraform type>.<name>`, as `vmplane plan` names it.")
    kind: str
    id: str | None = Field(description="The cloud's id; null when it is missing and was never recorded.")
    change: DriftChange
    fields: list[DriftField]
    repair: str = Field(description="What a repair does about it, in words.")
    repairable: bool = Field(description="False: reported only (the user's resource, e.g. an existing VPC's).")


class DriftReport(BaseModel):
    """What `GET /provisioning-jobs/{id}/drift` answers: the same JSON as `vmplane drift -o json`."""

    env: str
    job: str
    target: str
    drift: list[DriftedResource]
