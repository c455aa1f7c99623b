"""session token jobs: each session token names the job it was handed out with

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.drop_column("job_id")
