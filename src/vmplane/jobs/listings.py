"""Read-only queries for the CLI's `status`, `jobs` and `envs`: each opens its own unit of work and
returns plain data (records and dataclasses) that the caller only renders.

They live here, not in the CLI, because the CLI must not open transactions or build rows; and not in
jobs/operations.py because these are reads, with no decision attached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from vmplane.settings import Settings
from vmplane.store import job_rows
from vmplane.store.db import transaction
from vmplane.store.job_records import JobConflictError, JobNotFoundError, JobStatus, JobView
from vmplane.store.models import JobRow


@dataclass(frozen=True)
class EnvListing:
    """One registered environment (written by stepRegisterSpace)."""

    org: str
    name: str
    job: str
    cloud: str
    region: str
    registered_at: str  # ISO 8601
    outputs: dict[str, Any]

    @property
    def where(self) -> str:
        return str(self.outputs.get("target", self.region))

    @property
    def vms_ready(self) -> tuple[int, int]:
        """(ready, total) VMs as recorded at registration."""
        vms = self.outputs.get("vms", [])
        return sum(1 for v in vms if v.get("state") == "ready"), len(vms)

    def to_json(self) -> dict[str, Any]:
        return {
            "org": self.org,
            "name": self.name,
            "job": self.job,
            "cloud": self.cloud,
            "region": self.region,
            "registeredAt": self.registered_at,
            "outputs": self.outputs,
        }


def list_envs(settings: Settings, org: str | None = None) -> list[EnvListing]:
    with transaction(settings.db_url) as s:
        return [
            EnvListing(
                org=e.org,
                name=e.name,
                job=e.job_id,
                cloud=e.cloud,
                region=e.region,
                registered_at=e.registered_at.isoformat(),
                outputs=e.outputs,
            )
            for e in job_rows.list_envs(s, org)
        ]


def list_jobs(settings: Settings, org: str | None = None) -> list[JobView]:
    """The most recent jobs (newest first), as the API lists them."""
    with transaction(settings.db_url) as s:
        return [job_rows.view(r) for r in job_rows.list_jobs(s, org)]


def find_job(settings: Settings, ref: str) -> JobView:
    """A job by id, or the current (not deleted) job of an environment name, in one indexed query each.

    Same answers as `operations.find_job`, which scans the 1000 newest jobs in Python; an environment
    name shared by several orgs is ambiguous (a job id is not).
    """
    with transaction(settings.db_url) as s:
        row = s.scalars(select(JobRow).where(JobRow.id == ref)).first()
        if row is not None:
            return job_rows.view(row)
        stmt = (
            select(JobRow)
            .where(JobRow.env_name == ref, JobRow.status != JobStatus.deleted.value)
            .order_by(JobRow.created_at.desc(), JobRow.id)
            .limit(2)  # two are enough to know it is ambiguous
        )
        rows = list(s.scalars(stmt))
        if len(rows) > 1:
            raise JobConflictError(f"{ref} names environments of several orgs; use a job id")
        if not rows:
            raise JobNotFoundError(f"no job {ref}")
        return job_rows.view(rows[0])
