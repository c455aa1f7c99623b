"""pull requests: a work item's branch, its linked pull request and that PR's number

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("branch", sa.String(length=256), nullable=True))
        batch_op.add_column(sa.Column("pull_request", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("pull_number", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_work_items_pull_number"), ["pull_number"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_work_items_pull_number"))
        for column in ("pull_number", "pull_request", "branch"):
            batch_op.drop_column(column)
