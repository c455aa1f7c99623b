"""The durable inbox of webhook deliveries (stored by `app.github.ingest` before the ack),
done only after the handler committed, retried with backoff, parked (never dropped) when
it keeps failing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Engine, and_, or_, select, update
from sqlalchemy.orm import Session

from app.retry import queue_delay
from app.store import is_postgres
from app.store.tables import Delivery, InboxState

MAX_ATTEMPTS = 8
LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing delivery is tried, and the first wait between tries."""

    attempts: int = MAX_ATTEMPTS
    base_seconds: float = 1.0
    lease: timedelta = LEASE


def backoff(attempts: int, base_seconds: float = 1.0) -> timedelta:
    """How long a failed delivery waits before its next attempt."""
    return timedelta(seconds=queue_delay(attempts, base=base_seconds))


def _claimable(now: datetime) -> ColumnElement[bool]:
    return and_(
        Delivery.state == InboxState.QUEUED,
        Delivery.next_attempt_at <= now,
        or_(Delivery.claimed_until.is_(None), Delivery.claimed_until < now),
    )


def claim(engine: Engine, worker: str, now: datetime, lease: timedelta = LEASE) -> Delivery | None:
    """Take the oldest due delivery for `worker` until the lease runs out.

    PostgreSQL: `FOR UPDATE SKIP LOCKED`, so replicas never take the same row. SQLite: a
    conditional UPDATE, checked by its row count (its connection takes the file's write
    lock at that UPDATE). An idle worker's look at an empty inbox takes no lock.
    """
    with Session(engine) as session:
        if session.scalar(select(Delivery.id).where(_claimable(now)).limit(1)) is None:
            return None
    with Session(engine, expire_on_commit=False) as session, session.begin():
        query = select(Delivery).where(_claimable(now)).order_by(Delivery.id).limit(1)
        if is_postgres(engine):
            query = query.with_for_update(skip_locked=True)
        row = session.scalars(query).first()
        if row is None:
            return None
        taken = session.execute(
            update(Delivery)
            .where(Delivery.id == row.id, _claimable(now))
            .values(claimed_by=worker, claimed_until=now + lease, attempts=Delivery.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        if taken.rowcount != 1:  # type: ignore[attr-defined]
            return None
        session.refresh(row)
        return row


class LeaseLost(RuntimeError):
    """The delivery was claimed again meanwhile (this worker's lease ran out): the handler's
    transaction must roll back, the other claim's run is the one that counts."""


def mark_done(session: Session, claimed: Delivery, now: datetime) -> None:
    """Called inside the handler's transaction, so "done" commits with its effects — and only
    while the claim is still this one's (same claimer, same attempt), else `LeaseLost`."""
    done = session.execute(
        update(Delivery)
        .where(
            Delivery.id == claimed.id,
            Delivery.state == InboxState.QUEUED,
            Delivery.claimed_by == claimed.claimed_by,
            Delivery.attempts == claimed.attempts,
        )
        .values(state=InboxState.DONE, done_at=now, claimed_until=None, last_error=None)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        raise LeaseLost(f"delivery {claimed.delivery_id} was claimed again meanwhile")


def mark_failed(
    engine: Engine,
    claimed: Delivery,
    error: str,
    now: datetime,
    policy: RetryPolicy | None = None,
) -> InboxState:
    """Schedule a retry with backoff, or park the row after `policy.attempts` tries; a row
    claimed again meanwhile (this claim's lease ran out) is left to its new claimer."""
    policy = policy or RetryPolicy()
    parked = claimed.attempts >= policy.attempts
    values: dict[str, object] = {"last_error": error[-4000:], "claimed_until": None}
    if parked:
        values["state"] = InboxState.PARKED
    else:
        values["next_attempt_at"] = now + backoff(claimed.attempts, policy.base_seconds)
    with Session(engine) as session, session.begin():
        result = session.execute(
            update(Delivery)
            .where(
                Delivery.id == claimed.id,
                Delivery.state == InboxState.QUEUED,
                Delivery.claimed_by == claimed.claimed_by,
                Delivery.attempts == claimed.attempts,
            )
            .values(**values)
        )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return InboxState.QUEUED
    return InboxState.PARKED if parked else InboxState.QUEUED


def requeue(engine: Engine, delivery_id: str, now: datetime) -> bool:
    """Put a parked delivery back in line (operator action)."""
    with Session(engine) as session, session.begin():
        result = session.execute(
            update(Delivery)
            .where(Delivery.delivery_id == delivery_id, Delivery.state == InboxState.PARKED)
            .values(state=InboxState.QUEUED, attempts=0, next_attempt_at=now)
        )
        return result.rowcount == 1  # type: ignore[attr-defined]
