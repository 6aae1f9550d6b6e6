"""The inventory part: what the job owns in the cloud, found by its tags: leftovers, re-tagging, drift."""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.records import Leftover


class Inventory(abc.ABC):
    @abc.abstractmethod
    def leftovers(self, ctx: Context) -> list[Leftover]:
        """Everything still tagged with the job (a clean teardown leaves none)."""

    @abc.abstractmethod
    def retag(self, ctx: Context) -> None:
        """stepUpdateTags: re-tag every resource of the job with the spec's current tag set."""

    @abc.abstractmethod
    def drift(self, ctx: Context) -> list[Drift]:
        """How the cloud differs from `ctx.spec` and `ctx.infra`: read-only, no `save`."""

    @abc.abstractmethod
    def repair_drift(self, ctx: Context) -> None:
        """stepRepairDrift: read the drift again and make the cloud match (extras deleted, rules and tags
        set back, stopped VMs started); what is missing is dropped from the record so the provisioning
        steps that follow create it again under its name. Idempotent; the user's resources are never changed."""
