"""workers

Revision ID: 2026_12_01_0003
Revises: 2026_12_01_0002
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "2026_12_01_0003"
down_revision = "2026_12_01_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("executor_id", sa.String(80), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("executor_id", name=op.f("pk_workers")),
    )


def downgrade() -> None:
    op.drop_table("workers")
