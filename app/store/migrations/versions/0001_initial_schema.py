"""initial schema

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("work_item", sa.String(length=256), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_event"), ["event"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_ts"), ["ts"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_work_item"), ["work_item"], unique=False)

    op.create_table(
        "inbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(length=64), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sa.String(length=128), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("delivery_id"),
    )
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_inbox_state"), ["state"], unique=False)

    op.create_table(
        "installations",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("account_login", sa.String(length=256), nullable=False),
        sa.Column("account_type", sa.String(length=32), nullable=True),
        sa.Column("repository_selection", sa.String(length=16), nullable=True),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("work_item", sa.String(length=256), nullable=False),
        sa.Column("repo_full_name", sa.String(length=256), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("spawner_id", sa.Integer(), nullable=True),
        sa.Column("target_spawner_id", sa.Integer(), nullable=True),
        sa.Column("harness", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_jobs_repo_full_name"), ["repo_full_name"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_jobs_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_work_item"), ["work_item"], unique=False)

    op.create_table(
        "model_verdicts",
        sa.Column("token", sa.String(length=128), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("harness", sa.String(length=64), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("probed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token"),
    )
    op.create_table(
        "once",
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("ref", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "session_tokens",
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("work_item", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_session_tokens_work_item"), ["work_item"], unique=False
        )

    op.create_table(
        "slack_outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("work_item", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("slack_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_slack_outbox_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_slack_outbox_work_item"), ["work_item"], unique=False)

    op.create_table(
        "spawners",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("repositories", sa.JSON(), nullable=False),
        sa.Column("serves", sa.JSON(), nullable=True),
        sa.Column("harnesses", sa.JSON(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "work_items",
        sa.Column("id", sa.String(length=256), nullable=False),
        sa.Column("repo_full_name", sa.String(length=256), nullable=False),
        sa.Column("issue_number", sa.Integer(), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("html_url", sa.Text(), nullable=False),
        sa.Column("clone_url", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("checklist_comment_id", sa.BigInteger(), nullable=True),
        sa.Column("confirmation_comment_id", sa.BigInteger(), nullable=True),
        sa.Column("frozen", sa.JSON(), nullable=True),
        sa.Column("session", sa.JSON(), nullable=True),
        sa.Column("slack_ts", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_work_items_repo_full_name"), ["repo_full_name"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_work_items_state"), ["state"], unique=False)

    op.create_table(
        "repositories",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("full_name", sa.String(length=256), nullable=False),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["installation_id"], ["installations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_repositories_full_name"), ["full_name"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_repositories_installation_id"), ["installation_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_repositories_installation_id"))
        batch_op.drop_index(batch_op.f("ix_repositories_full_name"))

    op.drop_table("repositories")
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_work_items_state"))
        batch_op.drop_index(batch_op.f("ix_work_items_repo_full_name"))

    op.drop_table("work_items")
    op.drop_table("spawners")
    with op.batch_alter_table("slack_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_slack_outbox_work_item"))
        batch_op.drop_index(batch_op.f("ix_slack_outbox_state"))

    op.drop_table("slack_outbox")
    with op.batch_alter_table("session_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_session_tokens_work_item"))

    op.drop_table("session_tokens")
    op.drop_table("once")
    op.drop_table("model_verdicts")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_work_item"))
        batch_op.drop_index(batch_op.f("ix_jobs_state"))
        batch_op.drop_index(batch_op.f("ix_jobs_repo_full_name"))

    op.drop_table("jobs")
    op.drop_table("installations")
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_inbox_state"))

    op.drop_table("inbox")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_work_item"))
        batch_op.drop_index(batch_op.f("ix_events_ts"))
        batch_op.drop_index(batch_op.f("ix_events_event"))

    op.drop_table("events")
