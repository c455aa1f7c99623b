"""The durable inbox of webhook deliveries (stored by `app.github.ingest` before the ack),
done only after the handler committed, retried with backoff, parked (never dropped) when
it keeps failing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Engine,
    Select,
    and_,
    bindparam,
    func,
    or_,
    select,
    update,
)
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


def _build_claimable() -> ColumnElement[bool]:
    """Which deliveries a worker may take at `now` (a bound parameter): queued, due, and not
    under a live claim. Built once, like the statements below: composing an expression costs
    more than running it, and a flood runs these thousands of times a second."""
    now: BindParameter[datetime] = bindparam("now")
    return and_(
        Delivery.state == InboxState.QUEUED,
        Delivery.next_attempt_at <= now,
        or_(Delivery.claimed_until.is_(None), Delivery.claimed_until < now),
    )


_CLAIMABLE = _build_claimable()
_ANY_DUE = select(Delivery.id).where(_CLAIMABLE).limit(1)
_OLDEST = select(Delivery.id).where(_CLAIMABLE).order_by(Delivery.turn, Delivery.id).limit(1)


def _take(oldest: Select[Any]) -> Any:
    """Claim the delivery `oldest` picks, in one statement that returns the claimed row."""
    return (
        update(Delivery)
        .where(Delivery.id == oldest.scalar_subquery(), _CLAIMABLE)
        .values(
            claimed_by=bindparam("worker"),
            claimed_until=bindparam("until"),
            attempts=Delivery.attempts + 1,
        )
        .returning(Delivery)
        .execution_options(synchronize_session=False)
    )


_TAKE_SQLITE = _take(_OLDEST)
_TAKE_POSTGRES = _take(_OLDEST.with_for_update(skip_locked=True))
_SAME_CLAIM = and_(
    Delivery.id == bindparam("row"),
    Delivery.state == InboxState.QUEUED,
    Delivery.claimed_by == bindparam("claimer"),
    Delivery.attempts == bindparam("attempt"),
)
_DONE = (
    update(Delivery)
    .where(_SAME_CLAIM)
    .values(state=InboxState.DONE, done_at=bindparam("at"), claimed_until=None, last_error=None)
    .execution_options(synchronize_session=False)
)


def claim(
    conn: Connection,
    worker: str,
    now: datetime,
    lease: timedelta = LEASE,
    *,
    look_first: bool = True,
) -> Delivery | None:
    """Take the due delivery of the earliest turn (lanes.py: a flooding issue or repository
    waits its fair share), oldest first, for `worker` until the lease runs out, on `conn` (the
    connection its handler then runs on: one checkout per delivery).

    One UPDATE picks and claims the row and returns it: on PostgreSQL its pick is `FOR UPDATE
    SKIP LOCKED`, so replicas never take the same row, and it runs in autocommit (the claim
    is one round trip, no BEGIN or COMMIT of its own); on SQLite the statement runs under the
    file's write lock (its connection takes it at the UPDATE). With `look_first`, an idle
    worker's look at an empty inbox is a plain read that takes no lock; a worker that just
    took a delivery skips it (the inbox is likely not empty).
    """
    postgres = is_postgres(conn.engine)
    if postgres:
        conn.execution_options(isolation_level="AUTOCOMMIT")
    try:
        if look_first:
            with Session(conn) as session:
                if session.scalar(_ANY_DUE, {"now": now}) is None:
                    return None
        take = _TAKE_POSTGRES if postgres else _TAKE_SQLITE
        with Session(conn, expire_on_commit=False) as session, session.begin():
            params = {"now": now, "worker": worker, "until": now + lease}
            return session.scalars(take, params).first()
    finally:
        if postgres:
            conn.execution_options(isolation_level=conn.default_isolation_level)


class LeaseLost(RuntimeError):
    """The delivery was claimed again meanwhile (this worker's lease ran out): the handler's
    transaction must roll back, the other claim's run is the one that counts."""


def _claim_of(claimed: Delivery) -> dict[str, Any]:
    return {"row": claimed.id, "claimer": claimed.claimed_by, "attempt": claimed.attempts}


def mark_done(session: Session, claimed: Delivery, now: datetime) -> None:
    """Called inside the handler's transaction, so "done" commits with its effects — and only
    while the claim is still this one's (same claimer, same attempt), else `LeaseLost`."""
    done = session.execute(_DONE, {**_claim_of(claimed), "at": now})
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
            update(Delivery).where(_SAME_CLAIM).values(**values), _claim_of(claimed)
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


_KEYS_READ = (
    select(func.count())
    .select_from(Delivery)
    .where(
        or_(
            Delivery.delivery_id.in_(bindparam("ids", expanding=True)),
            Delivery.body_sha256.in_(bindparam("digests", expanding=True)),
        )
    )
)


def read_keys_ahead(conn: Connection, delivery_ids: list[str], digests: list[str]) -> None:
    """On SQLite, read the dedupe index pages a write of these keys will change (the prune's
    DELETE of old rows) before the write takes the file's lock. A page the kernel has dropped
    (a store bigger than memory, a machine that pages out cold file pages) then comes from
    the disk while this connection alone waits, not every writer behind it. The read takes
    no lock and leaves the pages in the page cache. On PostgreSQL, writers share no lock:
    nothing to do."""
    if conn.dialect.name != "sqlite" or not (delivery_ids or digests):
        return
    conn.execute(_KEYS_READ, {"ids": delivery_ids, "digests": digests}).scalar()
