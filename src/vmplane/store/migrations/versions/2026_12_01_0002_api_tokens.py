"""api tokens

Revision ID: 2026_12_01_0002
Revises: 2026_11_30_0001
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "2026_12_01_0002"
down_revision = "2026_11_30_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(24), nullable=False),
        sa.Column("org", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_index(op.f("ix_api_tokens_org"), "api_tokens", ["org"])


def downgrade() -> None:
    op.drop_index(op.f("ix_api_tokens_org"), table_name="api_tokens")
    op.drop_table("api_tokens")
