"""owed confirmation: the confirmation comment an execute committed to post, kept on the
work item until the progress publisher has posted it, so the spawn job need not wait for
GitHub and a crash before the post still ends in one confirmation

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    with op.batch_alter_table("work_items") as batch:
        batch.add_column(sa.Column("confirmation_owed", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("work_items") as batch:
        batch.drop_column("confirmation_owed")
