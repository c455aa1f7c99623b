"""pinned issue text: what the checklist was posted for

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pinned", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_column("pinned")
