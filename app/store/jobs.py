"""Queuing spawner jobs. A job's `key` (derived from the delivery that caused it) makes
queuing idempotent: a handler re-run after a crash queues nothing new."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.store.models import Job, JobKind

NOTIFY_CHANNEL = "the_loop_jobs"


def queue_job(
    session: Session,
    kind: JobKind,
    key: str,
    work_item: str,
    repo_full_name: str,
    payload: dict[str, Any],
) -> Job | None:
    """Add a job unless one with `key` exists; returns the new job, or None for a repeat."""
    if session.scalars(select(Job).where(Job.key == key)).first() is not None:
        return None
    job = Job(
        key=key, kind=kind, work_item=work_item, repo_full_name=repo_full_name, payload=payload
    )
    session.add(job)
    session.flush()
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :id)"), {"channel": NOTIFY_CHANNEL, "id": str(job.id)}
        )
    return job
