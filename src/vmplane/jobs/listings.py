"""Read-only queries for the CLI's `status`, `jobs` and `envs`: each opens its own unit of work and
returns plain data (records and dataclasses) that the caller only renders.

They live here, not in the CLI, because the CLI must not open transactions or build rows; and not in
jobs/operations.py because these are reads, with no decision attached.

Start-up: importing SQLAlchemy's ORM costs ~0.15-0.2 s, half of what a read-only command may take.
So when the DB is a SQLite file already at the migrations' head (the CLI's default), these read it
with the standard library's sqlite3, read-only; any other DB (PostgreSQL, a new or older file) goes
through the ORM, which also migrates. Both paths return the same records (tests/unit/test_listings.py).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vmplane.settings import Settings
from vmplane.store.job_records import (
    JobConflictError,
    JobNotFoundError,
    JobStatus,
    JobView,
    StepRecord,
)
from vmplane.store.revisions import is_head

# The columns `store.models.JobRow` and `EnvironmentRow` map (tables "jobs" and "environments").
_JOB_COLUMNS = "id, org, env_name, status, version, config, steps, teardown_steps, error, created_at, updated_at"
_ENV_COLUMNS = "e.org, e.name, e.job_id, e.cloud, e.region, e.outputs, e.registered_at"
# Each environment's job, for its cost (estimate, ledger) and its VMs as recorded now.
_ENV_JOIN = "environments e LEFT JOIN jobs j ON j.id = e.job_id"
LIST_LIMIT = 100  # as store.job_rows.list_jobs


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
    cost_estimate: dict[str, Any] | None = None  # {total, scheduledTotal, currency, complete}
    cost_so_far: dict[str, Any] | None = None  # cost.history.CostSoFar.to_json()
    stopped_vms: int = 0

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
            "stoppedVms": self.stopped_vms,
            "costEstimate": self.cost_estimate,
            "costSoFar": self.cost_so_far,
        }


def _job_costs(config: dict[str, Any] | None, created_at: datetime | None, now: datetime) -> dict[str, Any]:
    """An environment's monthly estimate, cost so far and stopped VMs, from its job's record."""
    if not config or created_at is None:
        return {}
    from vmplane.cost.history import job_cost_so_far

    vms = (config.get("infra") or {}).get("VMs") or []
    out: dict[str, Any] = {"stopped_vms": sum(1 for v in vms if v.get("State") == "stopped")}
    try:
        est = config.get("costEstimate")
        if est is None:  # a job recorded before vmplane kept its estimate
            from vmplane.cost.estimate import estimate
            from vmplane.envspec.models import EnvSpec

            est = estimate(EnvSpec.model_validate(config["spec"])).to_json()
        monthly = est["monthly"]
        out["cost_estimate"] = {
            "total": monthly["total"],
            "scheduledTotal": monthly["scheduledTotal"],
            "currency": est["currency"],
            "complete": est["complete"],
        }
        out["cost_so_far"] = job_cost_so_far(config, created_at, now).to_json()
    except (KeyError, ValueError):  # a record this version cannot read: no numbers rather than wrong ones
        pass
    return out


def _sqlite_file(settings: Settings) -> sqlite3.Connection | None:
    """A read-only connection to the SQLite DB if it exists and is current; else None (use the ORM)."""
    url = settings.db_url
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=10.0)
        conn.row_factory = sqlite3.Row
        current = is_head({r[0] for r in conn.execute("SELECT version_num FROM alembic_version")})
    except sqlite3.Error:
        return None
    if not current:
        conn.close()
        return None
    return conn


def _json(value: str | None) -> Any:
    return json.loads(value) if value is not None else None


def _time(value: str | datetime) -> datetime:
    # SQLAlchemy stores DateTime on SQLite as ISO text without a zone, and reads it back naive.
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _view(r: sqlite3.Row) -> JobView:
    """A `jobs` row as a JobView: the same fields as `store.job_rows.view` reads from a JobRow."""
    return JobView(
        id=r["id"],
        org=r["org"],
        env=r["env_name"],
        status=JobStatus(r["status"]),
        version=r["version"],
        steps=[StepRecord.model_validate(x) for x in _json(r["steps"]) or []],
        teardown_steps=[StepRecord.model_validate(x) for x in _json(r["teardown_steps"]) or []],
        config=_json(r["config"]),
        error=r["error"],
        created_at=_time(r["created_at"]),
        updated_at=_time(r["updated_at"]),
    )


def list_envs(settings: Settings, org: str | None = None, now: datetime | None = None) -> list[EnvListing]:
    """Registered environments, by org and name, with their cost so far as of `now` (default: now)."""
    at = now or datetime.now(UTC)
    conn = _sqlite_file(settings)
    if conn is not None:
        with closing(conn):
            where, args = (" WHERE e.org = ?", (org,)) if org else ("", ())
            stmt = (
                f"SELECT {_ENV_COLUMNS}, j.config AS job_config, j.created_at AS job_created_at"
                f" FROM {_ENV_JOIN}{where} ORDER BY e.org, e.name"
            )
            return [
                EnvListing(
                    org=r["org"],
                    name=r["name"],
                    job=r["job_id"],
                    cloud=r["cloud"],
                    region=r["region"],
                    registered_at=_time(r["registered_at"]).isoformat(),
                    outputs=_json(r["outputs"]) or {},
                    **_job_costs(
                        _json(r["job_config"]), _time(r["job_created_at"]) if r["job_created_at"] else None, at
                    ),
                )
                for r in conn.execute(stmt, args)
            ]
    from sqlalchemy import select

    from vmplane.store import job_rows
    from vmplane.store.db import transaction
    from vmplane.store.models import JobRow

    with transaction(settings.db_url) as s:
        envs = job_rows.list_envs(s, org)
        job_of = {j.id: j for j in s.scalars(select(JobRow).where(JobRow.id.in_([e.job_id for e in envs])))}
        return [
            EnvListing(
                org=e.org,
                name=e.name,
                job=e.job_id,
                cloud=e.cloud,
                region=e.region,
                registered_at=e.registered_at.isoformat(),
                outputs=e.outputs,
                **_job_costs(
                    job_of[e.job_id].config if e.job_id in job_of else None,
                    job_of[e.job_id].created_at if e.job_id in job_of else None,
                    at,
                ),
            )
            for e in envs
        ]


def list_jobs(settings: Settings, org: str | None = None) -> list[JobView]:
    """The most recent jobs (newest first), as the API lists them."""
    conn = _sqlite_file(settings)
    if conn is not None:
        with closing(conn):
            where, args = (" WHERE org = ?", (org,)) if org else ("", ())
            stmt = f"SELECT {_JOB_COLUMNS} FROM jobs{where} ORDER BY created_at DESC, id LIMIT {LIST_LIMIT}"
            return [_view(r) for r in conn.execute(stmt, args)]
    from vmplane.store import job_rows
    from vmplane.store.db import transaction

    with transaction(settings.db_url) as s:
        return [job_rows.view(r) for r in job_rows.list_jobs(s, org, limit=LIST_LIMIT)]


def find_job(settings: Settings, ref: str) -> JobView:
    """A job by id, or the current (not deleted) job of an environment name, in one indexed query each.

    An environment name shared by several orgs is ambiguous (a job id is not).
    """
    deleted = JobStatus.deleted.value
    conn = _sqlite_file(settings)
    if conn is not None:
        with closing(conn):
            row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (ref,)).fetchone()
            if row is not None:
                return _view(row)
            stmt = (
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE env_name = ? AND status != ?"
                " ORDER BY created_at DESC, id LIMIT 2"
            )
            views = [_view(r) for r in conn.execute(stmt, (ref, deleted))]
    else:
        from sqlalchemy import select

        from vmplane.store import job_rows
        from vmplane.store.db import transaction
        from vmplane.store.models import JobRow

        with transaction(settings.db_url) as s:
            found = s.scalars(select(JobRow).where(JobRow.id == ref)).first()
            if found is not None:
                return job_rows.view(found)
            q = (
                select(JobRow)
                .where(JobRow.env_name == ref, JobRow.status != deleted)
                .order_by(JobRow.created_at.desc(), JobRow.id)
                .limit(2)  # two are enough to know it is ambiguous
            )
            views = [job_rows.view(r) for r in s.scalars(q)]
    if len(views) > 1 and views[0].org == views[1].org:  # the same file on a real cloud and on the sandbox
        ids = ", ".join(f"{v.id} ({'sandbox' if v.target.sandbox else v.target.describe()})" for v in views)
        raise JobConflictError(f"{ref} names two jobs, on a real cloud and on the sandbox ({ids}); use a job id")
    if len(views) > 1:
        raise JobConflictError(f"{ref} names environments of several orgs; use a job id")
    if not views:
        raise JobNotFoundError(f"no job {ref}")
    return views[0]
