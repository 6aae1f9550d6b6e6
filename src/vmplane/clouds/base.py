"""The driver every cloud implements: a composition of narrow parts (`clouds.interfaces`), its capabilities,
and what a step hands it (`clouds.context`).

A part's method reads the desired spec and the recorded InfraConfig, calls its SDK idempotently
(find-by-tag before create), and writes what it observed back into InfraConfig. It calls
`ctx.save()` before and after every create so a crash leaves a record to reconcile, never an orphan.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from vmplane.clouds.capabilities import Capabilities, TagRules, capability_problems, runtime_script_problem
from vmplane.clouds.context import API_CALLS, MANAGED_BY, Context, Tagger, count_call
from vmplane.clouds.errors import (
    ConflictError,
    DeadlineExceededError,
    InvalidRequestError,
    NotFoundError,
    QuotaError,
    UnsupportedError,
)
from vmplane.clouds.interfaces import Parts
from vmplane.clouds.records import (
    Action,
    CommandResult,
    CommandStatus,
    Leftover,
    PlannedResource,
    SessionHint,
)
from vmplane.clouds.secret_access import SecretAccess, SecretProblemsError
from vmplane.clouds.steps import Step
from vmplane.envspec.models import Cloud, EnvSpec
from vmplane.state import InfraConfig, VMRecord, VMState

# Re-exported: drivers and the pipeline import these from here.
__all__ = [
    "API_CALLS",
    "MANAGED_BY",
    "Action",
    "Capabilities",
    "CloudDriver",
    "CommandResult",
    "CommandStatus",
    "Context",
    "Leftover",
    "PlannedResource",
    "SessionHint",
    "TagRules",
    "Tagger",
    "bootstrap_timed_out",
    "capability_problems",
    "count_call",
    "runtime_script_problem",
]


def bootstrap_timed_out(
    ctx: Context, vms: list[VMRecord], timeout: float, reasons: dict[str, str] | None = None
) -> DeadlineExceededError:
    """Mark the VMs still bootstrapping as failed (saved) and say where to look; the caller raises it.
    `reasons`: per VM name, the bootstrap log's failure lines the last sentinel check printed (e.g. the
    artifact that was unpinned or failed its checksum)."""
    late = [v.Name for v in vms if v.State is VMState.bootstrap]
    logged = reasons or {}
    why = "; ".join(f"{name}: {' / '.join(logged[name].splitlines())}" for name in late if logged.get(name))
    for v in vms:
        if v.State is VMState.bootstrap:
            v.State = VMState.failed
    ctx.save()
    return DeadlineExceededError(
        f"bootstrap sentinel not seen within {timeout}s on {', '.join(late)}; "
        + (f"the bootstrap logged: {why}; " if why else "")
        + "see /var/log/vmplane-bootstrap.log on the VM (vmplane exec)"
    )


class CloudDriver(Parts, abc.ABC):
    """One driver per cloud: the composition of its parts (`clouds.interfaces.Parts`), set by its
    `__init__`. A part the cloud lacks is None (`identity`, `lb`, `scheduler`), and `capabilities`
    (readable without the SDK, for `vmplane validate`) says the same.

    The pipeline's steps call the parts (`pipeline.steps`); `steps` lets a driver change what a step needs
    or add its own, in the same declarations.
    """

    cloud: ClassVar[Cloud]
    capabilities: ClassVar[Capabilities]

    def validate(self, spec: EnvSpec) -> list[str]:
        """What `spec` asks that this driver cannot do, each naming the field (stepValidate, before
        any cloud call; `vmplane validate` runs the same through `registry.static_problems`)."""
        return capability_problems(spec, self.capabilities, self.cloud)

    @abc.abstractmethod
    def preflight(self, ctx: Context) -> None:
        """stepValidate: check what the cloud must allow (images, quotas, name conflicts); create nothing."""

    def precheck(self, spec: EnvSpec, job_id: str, infra: InfraConfig | None = None) -> list[str]:
        """`preflight` before any job exists, so a request bound to fail records nothing: run on a throwaway
        Context (a copy of `infra`, or a fresh one; `save` does nothing), it only reads the cloud. Returns
        what the cloud refuses, each naming its field (the first one preflight meets). A failure to reach
        or authenticate to the cloud is not a refusal of the file: it raises its CloudError."""
        scratch = infra.model_copy(deep=True) if infra is not None else InfraConfig()
        ctx = Context(job_id=job_id, spec=spec, infra=scratch, tagger=Tagger.for_spec(spec, job_id))
        try:
            self.preflight(ctx)
        except SecretProblemsError as err:
            return err.problems  # each unreadable secret is its own problem, placed at its field
        except (InvalidRequestError, ConflictError, NotFoundError, QuotaError) as err:
            return [str(err)]
        return []

    # ---- plans and records (pure: no cloud calls) ----
    @abc.abstractmethod
    def provision_resources(self, spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
        """What applying `spec` creates, named as the steps name them (`infra` supplies what is already
        known, such as the zones)."""

    @abc.abstractmethod
    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        """What destroying the recorded environment deletes, in teardown order."""

    @abc.abstractmethod
    def outputs(self, spec: EnvSpec, infra: InfraConfig) -> dict[str, Any]:
        """The cloud-specific part of the inventory's outputs (stepRegisterSpace)."""

    def steps(self, table: Sequence[Step]) -> list[Step]:
        """The pipeline's step declarations as this driver runs them: `table` with what it changes
        (`Step.but`: other needs, an early start) and any step of its own appended. Default: unchanged."""
        return list(table)

    def secret_access(self) -> SecretAccess:
        """The stores this cloud's VMs read their secrets from (clouds/secret_access.py)."""
        raise self.unsupported("secret references")

    def unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"{what}: not supported by the {self.cloud.value} driver", code="Unsupported")
