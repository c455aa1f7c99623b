"""work item budget and tool calls: the budget's run per work item (its start, raises,
warned, spent), the tool calls its answers asked for and how long its harness worked

Revision ID: 0012
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0010"


def upgrade() -> None:
    with op.batch_alter_table("work_items") as batch:
        batch.add_column(sa.Column("budget", sa.JSON(), nullable=True))
    with op.batch_alter_table("work_item_usage") as batch:
        batch.add_column(
            sa.Column("tool_calls", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("active_ms", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("work_item_usage") as batch:
        batch.drop_column("active_ms")
        batch.drop_column("tool_calls")
    with op.batch_alter_table("work_items") as batch:
        batch.drop_column("budget")
