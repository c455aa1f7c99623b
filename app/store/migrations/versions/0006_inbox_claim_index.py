"""inbox claim index: the oldest queued delivery found by (state, id)

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_state_id", ["state", "id"], unique=False)
        batch_op.drop_index("ix_inbox_state")


def downgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_state", ["state"], unique=False)
        batch_op.drop_index("ix_inbox_state_id")
