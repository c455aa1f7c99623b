"""work item usage: model tokens and requests per work item, counted at the gateway

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "work_item_usage",
        sa.Column("work_item", sa.String(length=256), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cache_read_input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column(
            "cache_creation_input_tokens", sa.BigInteger(), nullable=False, server_default="0"
        ),
        sa.Column("requests", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("work_item"),
    )


def downgrade() -> None:
    op.drop_table("work_item_usage")
