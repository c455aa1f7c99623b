"""pinned issue text: what the checklist was posted for

Revision ID: 0004_pinned_issues
Revises: 0003_edges
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_pinned_issues"
down_revision = "0003_edges"


def upgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pinned", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_column("pinned")
