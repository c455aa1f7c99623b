"""delivery log: a delivery's origin (pushed or pulled) and the state of reading the log

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("origin", sa.String(length=8), nullable=False, server_default="pushed")
        )
    op.create_table(
        "delivery_log",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("seen_id", sa.BigInteger(), nullable=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_requests", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("refusals", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_pass", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("delivery_log")
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.drop_column("origin")
