"""spend days: what each repository's work items spent of the model per UTC day (the daily
and monthly spend caps' ledger), and who lifted the caps for a day

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.create_table(
        "spend_days",
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("repo_full_name", sa.String(length=256), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("usd_micros", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("lifted_by", sa.String(length=256), nullable=True),
        sa.Column("lifted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("installation_id", "repo_full_name", "day"),
    )


def downgrade() -> None:
    op.drop_table("spend_days")
