"""Engine and sessions; migrations run once per process on first use, and only if the DB is behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from vmplane.store.revisions import MIGRATIONS, is_head

_lock = threading.Lock()
_engines: dict[str, tuple[Engine, sessionmaker[Session]]] = {}


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL + a busy timeout: the CLI's progress reader and the workflow's writers share the file.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def is_current(engine: Engine) -> bool:
    """True if the DB is at the scripts' head (one query); False if behind, new, or unsure."""
    try:
        with engine.connect() as conn:
            at = {r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))}
    except Exception:  # no alembic_version table yet (a new DB), or any other doubt
        return False
    return is_head(at)


def migrate(engine: Engine) -> None:
    if is_current(engine):
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def session_factory(url: str) -> sessionmaker[Session]:
    with _lock:
        if url not in _engines:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url, future=True, pool_pre_ping=not url.startswith("sqlite"))
            if url.startswith("sqlite"):
                event.listen(engine, "connect", _sqlite_pragmas)
            migrate(engine)
            _engines[url] = (engine, sessionmaker(engine, expire_on_commit=False))
        return _engines[url][1]


@contextmanager
def transaction(url: str) -> Iterator[Session]:
    """One unit of work: commit at the boundary, roll back on error. Services never commit."""
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def dispose_all() -> None:
    with _lock:
        for engine, _ in _engines.values():
            engine.dispose()
        _engines.clear()
