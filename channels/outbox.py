"""The Slack outbox: messages are stored in the caller's transaction and sent later, in order.

A row is sent only when every earlier row of its work item has been sent, so a thread reads
in the order things happened even across retries and App replicas. Claiming takes a lease
(PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: a conditional UPDATE checked by row count);
a sender that dies mid-send leaves a row that becomes due again when the lease runs out.
Rows are never deleted: a sent row keeps the payload it was rendered from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from app.store import Sessions, SlackOutbox, is_postgres

LEASE = timedelta(minutes=2)


class OutboxState(StrEnum):
    QUEUED = "queued"  # waiting (first try, or a retry after backoff)
    SENDING = "sending"  # claimed by a sender until its lease runs out
    SENT = "sent"
    FAILED = "failed"  # Slack refused this message itself; later messages still go


UNSENT = (OutboxState.QUEUED, OutboxState.SENDING)


@dataclass(frozen=True)
class Claimed:
    """A row taken for sending, detached from any session."""

    id: int
    work_item_id: str
    kind: str
    payload: dict[str, Any]
    attempts: int


def enqueue(
    session: Session, work_item_id: str, kind: str, payload: dict[str, Any], now: datetime
) -> None:
    session.add(
        SlackOutbox(work_item_id=work_item_id, kind=kind, payload=payload, next_attempt_at=now)
    )


def _due(now: datetime) -> ColumnElement[bool]:
    return or_(
        and_(SlackOutbox.state == OutboxState.QUEUED, SlackOutbox.next_attempt_at <= now),
        and_(SlackOutbox.state == OutboxState.SENDING, SlackOutbox.next_attempt_at < now),
    )


def _first_unsent() -> ColumnElement[bool]:
    earlier = aliased(SlackOutbox)
    return ~exists().where(
        earlier.work_item_id == SlackOutbox.work_item_id,
        earlier.id < SlackOutbox.id,
        earlier.state.in_(UNSENT),
    )


def claim_next(sessions: Sessions, now: datetime, lease: timedelta = LEASE) -> Claimed | None:
    """Take the oldest due row that heads its work item's queue, or None."""
    with sessions() as session, session.begin():
        query = (
            select(SlackOutbox).where(_due(now), _first_unsent()).order_by(SlackOutbox.id).limit(1)
        )
        if is_postgres(sessions.engine):
            query = query.with_for_update(skip_locked=True, of=SlackOutbox)
        row = session.scalars(query).first()
        if row is None:
            return None
        taken = session.execute(
            update(SlackOutbox)
            .where(SlackOutbox.id == row.id, _due(now))
            .values(
                state=OutboxState.SENDING,
                next_attempt_at=now + lease,
                attempts=SlackOutbox.attempts + 1,
            )
            .execution_options(synchronize_session=False)
        )
        if taken.rowcount != 1:  # type: ignore[attr-defined]
            return None
        return Claimed(row.id, row.work_item_id, row.kind, dict(row.payload), row.attempts + 1)


def mark_sent(session: Session, row_id: int) -> None:
    session.execute(
        update(SlackOutbox)
        .where(SlackOutbox.id == row_id)
        .values(state=OutboxState.SENT, last_error=None)
    )


def mark_retry(sessions: Sessions, row_id: int, error: str, when: datetime) -> None:
    """Back in line at `when`, with the error kept for the status surface."""
    with sessions() as session, session.begin():
        session.execute(
            update(SlackOutbox)
            .where(SlackOutbox.id == row_id)
            .values(state=OutboxState.QUEUED, next_attempt_at=when, last_error=error[-2000:])
        )


def mark_failed(sessions: Sessions, row_id: int, error: str) -> None:
    with sessions() as session, session.begin():
        session.execute(
            update(SlackOutbox)
            .where(SlackOutbox.id == row_id)
            .values(state=OutboxState.FAILED, last_error=error[-2000:])
        )


def latest_payload(session: Session, work_item_id: str, kind: str) -> dict[str, Any] | None:
    """The newest payload of `kind` queued for `work_item_id` (e.g. the checklist it rendered)."""
    row = session.scalars(
        select(SlackOutbox)
        .where(SlackOutbox.work_item_id == work_item_id, SlackOutbox.kind == kind)
        .order_by(SlackOutbox.id.desc())
        .limit(1)
    ).first()
    return dict(row.payload) if row is not None else None


@dataclass(frozen=True)
class OutboxStatus:
    """What an operator needs to see: is Slack keeping up, and if not, why."""

    queued: int
    retrying: int
    failed: int
    oldest_queued_at: datetime | None
    last_error: str | None

    @property
    def healthy(self) -> bool:
        return self.retrying == 0 and self.failed == 0


def status(sessions: Sessions) -> OutboxStatus:
    with sessions() as session:
        counts = dict(
            session.execute(
                select(SlackOutbox.state, func.count()).group_by(SlackOutbox.state)
            ).all()
        )
        unsent = SlackOutbox.state.in_(UNSENT)
        retrying = session.scalar(
            select(func.count()).where(unsent, SlackOutbox.last_error.is_not(None))
        )
        oldest = session.scalar(select(func.min(SlackOutbox.created_at)).where(unsent))
        last_error = session.scalars(
            select(SlackOutbox.last_error)
            .where(SlackOutbox.last_error.is_not(None))
            .order_by(SlackOutbox.id.desc())
            .limit(1)
        ).first()
    return OutboxStatus(
        queued=int(counts.get(OutboxState.QUEUED, 0)) + int(counts.get(OutboxState.SENDING, 0)),
        retrying=int(retrying or 0),
        failed=int(counts.get(OutboxState.FAILED, 0)),
        oldest_queued_at=oldest,
        last_error=last_error,
    )
