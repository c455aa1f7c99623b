"""work item progress: phase pointer, gate decisions, artifacts, the progress comment

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("phase", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("gates", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("artifacts", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("progress_comment_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("progress_due_at", sa.DateTime(timezone=True), nullable=True))
        for counter in ("progress_rev", "progress_posted_rev", "progress_attempts"):
            batch_op.add_column(
                sa.Column(counter, sa.Integer(), nullable=False, server_default="0")
            )
        batch_op.create_index(
            batch_op.f("ix_work_items_progress_due_at"), ["progress_due_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_work_items_progress_due_at"))
        for column in (
            "progress_attempts",
            "progress_posted_rev",
            "progress_rev",
            "progress_due_at",
            "progress_comment_id",
            "artifacts",
            "gates",
            "phase",
        ):
            batch_op.drop_column(column)
