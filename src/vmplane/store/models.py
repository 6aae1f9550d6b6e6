"""vmplane's own tables. Job state (spec, InfraConfig, steps) lives in JSON columns, so a new field to
track is a model extension, not a migration."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so Alembic migrations are the same on SQLite and PostgreSQL.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class JobRow(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org: Mapped[str] = mapped_column(String(64), index=True)
    env_name: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(20), index=True)
    # Bumped on every write; the API's If-Match and optimistic concurrency use it.
    version: Mapped[int] = mapped_column(Integer, default=1)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # {"spec", "infra", "target"}
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    teardown_steps: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)

    # Optimistic concurrency: every UPDATE is `... WHERE version = <the version read>` and sets it + 1, so
    # of two writers that read the same version one fails (StaleDataError) instead of losing an update.
    __mapper_args__ = {"version_id_col": version}


class EnvironmentRow(Base):
    """The inventory (`vmplane envs`): environments that stepRegisterSpace made visible."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("org", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    cloud: Mapped[str] = mapped_column(String(16))
    region: Mapped[str] = mapped_column(String(32))
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    registered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TokenRow(Base):
    """An API bearer token: scoped to one org with a role. Only its SHA-256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(24), primary_key=True)
    org: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class WorkerRow(Base):
    """A `vmplane worker` process: its DBOS executor id and a heartbeat. A worker whose heartbeat is
    older than the deadline is dead; the first live worker to claim its row recovers its workflows."""

    __tablename__ = "workers"

    executor_id: Mapped[str] = mapped_column(String(80), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
