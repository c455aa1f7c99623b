"""inbox turns: deliveries claimed by their lane's fair turn, then by arrival

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn", sa.BigInteger(), nullable=False, server_default="0"))
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_state_turn", ["state", "turn", "id"], unique=False)
        batch_op.drop_index("ix_inbox_state_id")


def downgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_state_id", ["state", "id"], unique=False)
        batch_op.drop_index("ix_inbox_state_turn")
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.drop_column("turn")
