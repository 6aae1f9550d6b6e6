"""The migration scripts' head revision, read from their text without importing alembic (~0.1 s) or
SQLAlchemy: `store.db` uses it to skip `alembic upgrade` when the DB is current, and the CLI's
read-only commands to know that a SQLite file already has the tables they read."""

from __future__ import annotations

import re
from pathlib import Path

MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*['\"]?([^'\"\s]+)['\"]?", re.MULTILINE)


def head_revisions() -> set[str]:
    """Revisions that no script names as its parent. A merge's tuple parses as garbage, which yields
    several heads, and callers then let alembic decide."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in MIGRATIONS.glob("versions/*.py"):
        found: dict[str, str] = {m.group(1): m.group(2) for m in _REVISION.finditer(script.read_text())}
        if "revision" in found:
            revisions.add(found["revision"])
        if found.get("down_revision", "None") != "None":
            parents.add(found["down_revision"])
    return revisions - parents


def is_head(db_revisions: set[str]) -> bool:
    """True only if the DB is at the scripts' single head."""
    heads = head_revisions()
    return len(heads) == 1 and db_revisions == heads
