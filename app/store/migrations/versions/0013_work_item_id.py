"""work item id: one name for a work item's id, `work_item_id`, in every table that holds
one (events, jobs, session_tokens, slack_outbox, work_item_usage), and in the job payloads
a spawner reads (their `work_item` key becomes `work_item_id`)

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"

OLD, NEW = "work_item", "work_item_id"
# The tables with the column, and whether it is indexed (work_item_usage's is its key).
TABLES = {
    "events": True,
    "jobs": True,
    "session_tokens": True,
    "slack_outbox": True,
    "work_item_usage": False,
}


def _rename(old: str, new: str) -> None:
    for table, indexed in TABLES.items():
        with op.batch_alter_table(table) as batch:
            if indexed:
                batch.drop_index(f"ix_{table}_{old}")
            batch.alter_column(old, new_column_name=new, existing_type=sa.String(length=256))
        if indexed:  # after the batch: SQLite's copy of the table knows only the old name
            op.create_index(f"ix_{table}_{new}", table, [new], unique=False)


def _rekey_payloads(old: str, new: str) -> None:
    """A job's payload names its item too (the spawner parses it): rename that key in every
    stored payload, so a job queued before the upgrade is served after it."""
    jobs = sa.table("jobs", sa.column("id", sa.Integer), sa.column("payload", sa.JSON))
    bind = op.get_bind()
    rows = bind.execute(sa.select(jobs.c.id, jobs.c.payload)).all()
    for job_id, payload in rows:
        if isinstance(payload, dict) and old in payload:
            rekeyed = {(new if key == old else key): value for key, value in payload.items()}
            bind.execute(sa.update(jobs).where(jobs.c.id == job_id).values(payload=rekeyed))


def upgrade() -> None:
    _rename(OLD, NEW)
    _rekey_payloads(OLD, NEW)


def downgrade() -> None:
    _rekey_payloads(NEW, OLD)
    _rename(NEW, OLD)
