"""progress lease: until when one publisher's pass holds an item's progress comment (and
the confirmation it owes), apart from when the comment is due, so that a change to the item
made during a pass cannot let a second publisher post the same comment again

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    with op.batch_alter_table("work_items") as batch:
        batch.add_column(
            sa.Column("progress_leased_until", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("work_items") as batch:
        batch.drop_column("progress_leased_until")
