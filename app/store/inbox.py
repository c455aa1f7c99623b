"""The durable inbox of webhook deliveries (stored by `app.github.ingest` before the ack),
done only after the handler committed, retried with backoff, parked (never dropped) when
it keeps failing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Dialect,
    Engine,
    bindparam,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from app.retry import queue_delay
from app.store.engines import is_postgres
from app.store.sqlite_writes import StoreError
from app.store.tables import Delivery, InboxState, decompress_body, driver_time

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


@dataclass(frozen=True)
class ClaimedDelivery:
    """A delivery a worker holds: what its handlers read, and the claim (`claimed_by`,
    `attempts`) that marking it done or failed must still match."""

    id: int
    delivery_id: str
    event: str
    action: str | None
    body: bytes  # as received (decompressed)
    attempts: int
    claimed_by: str


class _InboxSQL:
    """A worker's statements as the driver's SQL, one set per dialect.

    Every routed delivery is claimed and then marked done, so these two run as often as
    webhooks arrive. As ORM statements they cost more than the handlers themselves (cache
    key, bulk-update bookkeeping and loading an ORM row; `bench/e2e.py` shows it, where
    handlers have to keep up with the webhooks). The driver runs them as written, with times
    as `driver_time` gives them.

    Claiming is one UPDATE that picks the queued, due, unclaimed delivery of the earliest
    turn (lanes.py: a flooding issue or repository waits its fair share), oldest first, and
    returns it. On PostgreSQL the pick is `FOR UPDATE SKIP LOCKED`, so replicas never take
    the same row.
    """

    def __init__(self, dialect: Dialect) -> None:
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        table = Delivery.__tablename__
        due = (
            f"state = '{InboxState.QUEUED}' AND next_attempt_at <= {mark} "
            f"AND (claimed_until IS NULL OR claimed_until < {mark})"
        )
        skip_locked = " FOR UPDATE SKIP LOCKED" if dialect.name == "postgresql" else ""
        self.any_due = f"SELECT 1 FROM {table} WHERE {due} LIMIT 1"  # (now, now)
        # (worker, until, now, now, now, now)
        self.take = (
            f"UPDATE {table} SET claimed_by = {mark}, claimed_until = {mark}, "
            f"attempts = attempts + 1 WHERE id = (SELECT id FROM {table} WHERE {due} "
            f"ORDER BY turn, id LIMIT 1{skip_locked}) AND {due} "
            "RETURNING id, delivery_id, event, action, body, attempts, claimed_by"
        )
        # Only while the claim is still the caller's: (row, claimer, attempt) at the end.
        same_claim = (
            f"id = {mark} AND state = '{InboxState.QUEUED}' "
            f"AND claimed_by = {mark} AND attempts = {mark}"
        )
        self.done = (  # (at, *claim)
            f"UPDATE {table} SET state = '{InboxState.DONE}', done_at = {mark}, "
            f"claimed_until = NULL, last_error = NULL WHERE {same_claim}"
        )
        self.retry_later = (  # (error, next attempt, *claim)
            f"UPDATE {table} SET last_error = {mark}, claimed_until = NULL, "
            f"next_attempt_at = {mark} WHERE {same_claim}"
        )
        self.park = (  # (error, *claim)
            f"UPDATE {table} SET last_error = {mark}, claimed_until = NULL, "
            f"state = '{InboxState.PARKED}' WHERE {same_claim}"
        )
        self.moment = driver_time(dialect)


_sql_by_dialect: dict[tuple[str, str], _InboxSQL] = {}


def _sql(dialect: Dialect) -> _InboxSQL:
    key = (dialect.name, dialect.driver)
    found = _sql_by_dialect.get(key)
    if found is None:
        found = _sql_by_dialect[key] = _InboxSQL(dialect)
    return found


def claim(
    conn: Connection,
    worker: str,
    now: datetime,
    lease: timedelta = LEASE,
    *,
    look_first: bool = True,
) -> ClaimedDelivery | None:
    """Take the due delivery of the earliest turn, oldest first, for `worker` until the lease
    runs out, on `conn` (the connection its handler then runs on: one checkout per delivery).

    On PostgreSQL the claim runs in autocommit (one round trip, no BEGIN or COMMIT of its
    own); on SQLite the UPDATE runs under the file's write lock (its connection takes it at
    the UPDATE). With `look_first`, an idle worker's look at an empty inbox is a plain read
    that takes no lock; a worker that just took a delivery skips it (the inbox is likely not
    empty).
    """
    sql = _sql(conn.dialect)
    at = sql.moment(now)
    postgres = is_postgres(conn.engine)
    if postgres:
        conn.execution_options(isolation_level="AUTOCOMMIT")
    try:
        if look_first:
            with conn.begin():
                if conn.exec_driver_sql(sql.any_due, (at, at)).first() is None:
                    return None
        with conn.begin():
            params = (worker, sql.moment(now + lease), at, at, at, at)
            row = conn.exec_driver_sql(sql.take, params).first()
    finally:
        if postgres:
            conn.execution_options(isolation_level=conn.default_isolation_level)
    if row is None:
        return None
    row_id, delivery_id, event, action, body, attempts, claimed_by = row
    return ClaimedDelivery(
        row_id, delivery_id, event, action, decompress_body(bytes(body)), attempts, claimed_by
    )


class LeaseLost(StoreError, RuntimeError):
    """The delivery was claimed again meanwhile (this worker's lease ran out): the handler's
    transaction must roll back, the other claim's run is the one that counts."""


def _claim_of(claimed: ClaimedDelivery) -> tuple[int, str, int]:
    """The parameters of `_InboxSQL`'s same-claim condition."""
    return claimed.id, claimed.claimed_by, claimed.attempts


def mark_done(session: Session, claimed: ClaimedDelivery, now: datetime) -> None:
    """Called inside the handler's transaction, so "done" commits with its effects — and only
    while the claim is still this one's (same claimer, same attempt), else `LeaseLost`."""
    conn = session.connection()
    sql = _sql(conn.dialect)
    if conn.exec_driver_sql(sql.done, (sql.moment(now), *_claim_of(claimed))).rowcount != 1:
        raise LeaseLost(f"delivery {claimed.delivery_id} was claimed again meanwhile")


def mark_failed(
    engine: Engine,
    claimed: ClaimedDelivery,
    error: str,
    now: datetime,
    policy: RetryPolicy | None = None,
) -> InboxState:
    """Schedule a retry with backoff, or park the row after `policy.attempts` tries; a row
    claimed again meanwhile (this claim's lease ran out) is left to its new claimer."""
    policy = policy or RetryPolicy()
    parked = claimed.attempts >= policy.attempts
    sql = _sql(engine.dialect)
    values: tuple[Any, ...]
    if parked:
        statement, values = sql.park, (error[-4000:],)
    else:
        again = now + backoff(claimed.attempts, policy.base_seconds)
        statement, values = sql.retry_later, (error[-4000:], sql.moment(again))
    with engine.begin() as conn:
        result = conn.exec_driver_sql(statement, (*values, *_claim_of(claimed)))
    if result.rowcount != 1:
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


LOOKUP_CHUNK = 500  # delivery ids per query: well under every backend's parameter limit


def known(engine: Engine, guids: list[str]) -> set[str]:
    """Which of `guids` the inbox holds already (the delivery log's reader skips them)."""
    found: set[str] = set()
    with Session(engine) as session:
        for start in range(0, len(guids), LOOKUP_CHUNK):
            chunk = guids[start : start + LOOKUP_CHUNK]
            rows = session.scalars(
                select(Delivery.delivery_id).where(Delivery.delivery_id.in_(chunk))
            )
            found.update(rows)
    return found
