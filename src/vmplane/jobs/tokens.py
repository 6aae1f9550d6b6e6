"""API tokens: bearer tokens scoped to one org with a role; only a SHA-256 of each is stored.

Tokens are 256 bits from `secrets`, so a plain SHA-256 is enough to store them (no salt or slow hash:
nothing to brute-force). The token is shown once, at creation, and never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from vmplane.settings import Settings
from vmplane.store.db import transaction
from vmplane.store.models import TokenRow

TOKEN_PREFIX = "vmp_"


class Role(StrEnum):
    viewer = "viewer"  # reads jobs of its org
    operator = "operator"  # also creates and patches jobs
    admin = "admin"  # also deletes jobs and manages tokens

    def allows(self, needed: Role) -> bool:
        order = [Role.viewer, Role.operator, Role.admin]
        return order.index(self) >= order.index(needed)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, org: str, role: Role) -> tuple[str, TokenRow]:
    """Returns the token (to show once) and its stored row."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = TokenRow(id=f"tok-{secrets.token_hex(6)}", org=org, role=role.value, token_hash=_hash(token))
    session.add(row)
    session.flush()
    return token, row


def verify(session: Session, token: str) -> TokenRow | None:
    """The live token row for a presented token, or None."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    digest = _hash(token)
    row = session.scalars(select(TokenRow).where(TokenRow.token_hash == digest)).first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row


def revoke(session: Session, token_id: str, org: str) -> bool:
    row = session.scalars(select(TokenRow).where(TokenRow.id == token_id, TokenRow.org == org)).first()
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = datetime.now(UTC)
    return True


def list_tokens(session: Session, org: str) -> list[TokenRow]:
    return list(session.scalars(select(TokenRow).where(TokenRow.org == org).order_by(TokenRow.created_at)))


# ---- units of work for the CLI (each opens and commits its own transaction) ---------------------


@dataclass(frozen=True)
class IssuedToken:
    id: str
    org: str
    role: Role
    token: str  # shown once, never stored


def issue_token(settings: Settings, org: str, role: Role) -> IssuedToken:
    with transaction(settings.db_url) as s:
        token, row = create_token(s, org, role)
        return IssuedToken(id=row.id, org=org, role=role, token=token)


def revoke_token(settings: Settings, token_id: str, org: str) -> bool:
    """True if a live token was revoked (committed); False if there was none."""
    with transaction(settings.db_url) as s:
        return revoke(s, token_id, org)
