"""hardened edges: body hashes of deliveries, session token expiry, job tokens

Revision ID: 0004
Revises: 0003
"""

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.add_column(sa.Column("body_sha256", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_inbox_body_sha256"), ["body_sha256"], unique=True)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("github_token", sa.Text(), nullable=True))
    # Tokens minted before expiry existed live two hours more, then renew or lapse like any.
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    tokens = sa.table("session_tokens", sa.column("expires_at", sa.DateTime(timezone=True)))
    op.execute(tokens.update().values(expires_at=datetime.now(UTC) + timedelta(hours=2)))
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.alter_column(
            "expires_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("github_token")
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_inbox_body_sha256"))
        batch_op.drop_column("body_sha256")
