"""jobs/listings.py reads a current SQLite file with the standard library; it must return exactly
what the ORM path returns (the path for PostgreSQL and for new or older files)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.helpers import EXAMPLES

from vmplane.envspec.load import load_spec
from vmplane.jobs import listings, operations
from vmplane.jobs import service as jobs
from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.target import Target

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def settings(tmp_path) -> Settings:
    s = Settings(home=tmp_path)
    spec = load_spec(EXAMPLES / "fixed.jsonc")
    target = Target.for_spec(spec, "http://127.0.0.1:1")
    with transaction(s.db_url) as session:
        for org, name in (("acme", "a"), ("acme", "b"), ("other", "a")):
            row = jobs.create_job(session, spec.model_copy(update={"org": org, "name": name}), target, ["s1", "s2"])
            jobs.register_env(session, row, {"vms": [{"state": "ready"}, {"state": "pending"}]})
    return s


def both(settings: Settings, monkeypatch: pytest.MonkeyPatch, fn, *args):
    fast = fn(settings, *args)
    with monkeypatch.context() as m:
        m.setattr(listings, "_sqlite_file", lambda _settings: None)
        orm = fn(settings, *args)
    return fast, orm


def test_fast_path_is_taken_for_a_current_sqlite_file(settings: Settings) -> None:
    conn = listings._sqlite_file(settings)
    assert conn is not None
    conn.close()
    assert listings._sqlite_file(Settings(home=settings.home / "nothing-here")) is None


def test_list_jobs_and_envs_match_the_orm(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for org in (None, "acme"):
        fast, orm = both(settings, monkeypatch, listings.list_jobs, org)
        assert [v.to_json() for v in fast] == [v.to_json() for v in orm]
        assert len(fast) == (3 if org is None else 2)
        fast_envs, orm_envs = both(settings, monkeypatch, listings.list_envs, org, NOW)  # one clock for both
        assert fast_envs == orm_envs
        assert fast_envs[0].vms_ready == (1, 2)
        assert fast_envs[0].cost_estimate is not None and fast_envs[0].cost_estimate["total"] > 0
        assert fast_envs[0].cost_so_far is not None and fast_envs[0].cost_so_far["since"] is None  # not provisioned


def test_find_job_matches_the_orm_and_operations(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = listings.list_jobs(settings, "acme")[0].id
    for ref in (job_id, "b"):
        fast, orm = both(settings, monkeypatch, listings.find_job, ref)
        assert fast.to_json() == orm.to_json() == operations.find_job(settings, ref).to_json()
    for ref, error in (("a", jobs.JobConflictError), ("nope", jobs.JobNotFoundError)):
        for fast_path in (True, False):
            with monkeypatch.context() as m:
                if not fast_path:
                    m.setattr(listings, "_sqlite_file", lambda _settings: None)
                with pytest.raises(error):
                    listings.find_job(settings, ref)
