"""jobs and environments

Revision ID: 2026_11_30_0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "2026_11_30_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org", sa.String(64), nullable=False),
        sa.Column("env_name", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("teardown_steps", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
    )
    op.create_index("ix_jobs_org", "jobs", ["org"])
    op.create_index("ix_jobs_env_name", "jobs", ["env_name"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("cloud", sa.String(16), nullable=False),
        sa.Column("region", sa.String(32), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_environments"),
        sa.UniqueConstraint("org", "name", name="uq_environments_org"),
    )
    op.create_index("ix_environments_job_id", "environments", ["job_id"])


def downgrade() -> None:
    op.drop_table("environments")
    op.drop_table("jobs")
