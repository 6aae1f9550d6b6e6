"""How many jobs a process runs at once comes from VMPLANE_WORKER_JOBS and reaches DBOS's job queue."""

from __future__ import annotations

import threading
from typing import Any

import dbos
import pytest
from pydantic import ValidationError

import vmplane.pipeline.workflows  # noqa: F401 - its decorators need the real DBOS, before the fake below
from vmplane.pipeline import engine
from vmplane.settings import Settings


def test_worker_jobs_default_environment_and_bounds(monkeypatch, tmp_path):
    assert Settings(home=tmp_path).worker_jobs == 8
    monkeypatch.setenv("VMPLANE_WORKER_JOBS", "20")
    assert Settings(home=tmp_path).worker_jobs == 20
    for bad in ("0", "33"):
        monkeypatch.setenv("VMPLANE_WORKER_JOBS", bad)
        with pytest.raises(ValidationError, match="worker_jobs"):
            Settings(home=tmp_path)


def test_the_job_queue_runs_as_many_jobs_as_the_setting_says(monkeypatch, tmp_path):
    calls: dict[str, Any] = {}

    class FakeDBOS:  # records what launch() asks of DBOS, starts nothing
        def __init__(self, config: dict[str, Any]) -> None:
            calls["config"] = config

        @staticmethod
        def launch() -> None:
            calls["launched"] = True

        @staticmethod
        def register_queue(name: str, **kwargs: Any) -> None:
            calls["queue"] = (name, kwargs)

    monkeypatch.setattr(dbos, "DBOS", FakeDBOS)
    monkeypatch.setattr(engine, "_launched", threading.Event())
    engine.launch(Settings(home=tmp_path, worker_jobs=20))
    assert calls["launched"]
    assert calls["queue"] == (engine.QUEUE_NAME, {"worker_concurrency": 20, "polling_interval_sec": 0.2})
