"""Process-wide settings from the environment (VMPLANE_*), read once and cheaply."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VMPLANE_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".vmplane")
    sandbox_port: int = Field(default=4566, ge=1, le=65535)
    # The embedded Google Cloud sandbox, served by the same process on its own port.
    gcp_sandbox_port: int = Field(default=4567, ge=1, le=65535)
    # vmplane's own tables (jobs, environments); SQLite under home unless set.
    database_url: str | None = None
    # DBOS's system database; defaults to a second SQLite file next to the first (or the same
    # PostgreSQL server when database_url is PostgreSQL).
    dbos_database_url: str | None = None
    # Jobs one process (a worker, or `serve` with its worker) runs at once. A job mostly waits on the cloud,
    # so the bound is not the CPU but DBOS's connection pool (20 per process; each running job holds
    # one only while it checkpoints) and the clouds' API rate limits (bench/README.md, issue 12 part 3).
    worker_jobs: int = Field(default=8, ge=1, le=32)
    # The operator's bearer for /metrics (which aggregates every org); unset: no /metrics endpoint.
    metrics_token: SecretStr | None = None

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'vmplane.db'}"

    @property
    def dbos_url(self) -> str:
        if self.dbos_database_url:
            return self.dbos_database_url
        if self.database_url and not self.database_url.startswith("sqlite"):
            return self.database_url
        return f"sqlite:///{self.home / 'dbos.sqlite'}"

    def ensure_home(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.home


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
