"""Retention: what the store forgets, and when.

- a done delivery's body, after `bodies` (the row stays: it still answers for dedupe);
- a done delivery's row — its delivery id and body hash, the dedupe keys — after `dedupe`;
- event rows, after `events`;
- the ids of events spawners reported (kept so a resent batch is not counted twice), after
  `spawner_event_ids`.

Queued and parked deliveries are never touched: a parked one waits for an operator.

Every pass works in batches of 50 rows, each its own short transaction, with a pause
between them, so a webhook's write never waits behind more than one batch (on SQLite the
batch's connection holds the file's write lock only from its first write to its commit, and
never checkpoints inside it). While the machine's CPUs are nearly all busy the pauses grow
(`app.store.pacing`): a pass yields to a flood of webhooks and catches up after it. Rows
are found by primary key from where the last batch stopped, and the search is a read that
takes no lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Engine,
    LargeBinary,
    Select,
    bindparam,
    delete,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.orm import InstrumentedAttribute

from app.store.inbox import read_keys_ahead
from app.store.pacing import Pacer
from app.store.sqlite_writes import no_checkpoints
from app.store.tables import Delivery, Event, InboxState, Once

log = logging.getLogger(__name__)

BATCH = 50  # rows a transaction: its write lock is held for a few milliseconds
PAUSE = 0.02  # seconds between batches (more while the CPUs are busy): waiting writers go first
# Batches between the pass's own WAL checkpoints. A checkpoint after every batch was most of
# a pass's time: consecutive batches change the same pages,
# which one checkpoint copies once. The App's own checkpointer runs meanwhile anyway.
CHECKPOINT_EVERY = 20
SPAWNER_EVENT_KEY = "spawner-event:"  # `Once` keys of reported event ids (app.fleet.reports)


@dataclass(frozen=True)
class Retention:
    bodies: timedelta = timedelta(days=7)
    dedupe: timedelta = timedelta(days=8)
    events: timedelta = timedelta(days=90)
    spawner_event_ids: timedelta = timedelta(days=30)


@dataclass
class Pruned:
    """How many of each the pass removed."""

    bodies: int = 0
    deliveries: int = 0
    events: int = 0
    spawner_event_ids: int = 0

    def total(self) -> int:
        return self.bodies + self.deliveries + self.events + self.spawner_event_ids

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def prune(
    engine: Engine,
    retention: Retention,
    now: datetime,
    *,
    batch: int = BATCH,
    pause: float = PAUSE,
) -> Pruned:
    """One pass over the store; returns what it removed."""
    pruned = Pruned()
    reported = Once.key.startswith(SPAWNER_EVENT_KEY)
    old_ids = reported & (Once.created_at < now - retention.spawner_event_ids)
    with (
        engine.connect() as conn,
        no_checkpoints(conn.connection.dbapi_connection),
        _Batches(conn, pause) as batches,
    ):
        pruned.bodies, pruned.deliveries = _prune_deliveries(batches, retention, now, batch)
        old_events = Event.ts < now - retention.events
        pruned.events = _delete_in_batches(batches, Event.id, old_events, batch)
        pruned.spawner_event_ids = _delete_in_batches(batches, Once.key, old_ids, batch)
    return pruned


class _Batches:
    """One connection for a pass; after each batch's commit, a rest (`Pacer`: longer while
    the machine is busy acknowledging). On SQLite its commits never stop to checkpoint
    (`prune` holds them back: that would happen holding the write lock); every
    CHECKPOINT_EVERY batches, and at the end, a PASSIVE checkpoint copies their pages into
    the database file, which no writer waits for. Deleted rows are zeroed only in pages a
    batch writes anyway (`secure_delete=FAST`; the build's default zeroes every freed page
    too, and writing those was a third of the pass's checkpoint time): what retention is for
    is the store's size, and the bodies are GitHub's payloads, not secrets."""

    def __init__(self, conn: Connection, pause: float) -> None:
        self.conn = conn
        self.pacer = Pacer(pause)
        self.sqlite = conn.dialect.name == "sqlite"
        self.committed = 0
        self.secure_delete: Any = None  # the connection's setting, put back after the pass

    def __enter__(self) -> _Batches:
        if self.sqlite:
            self.secure_delete = self.conn.exec_driver_sql("PRAGMA secure_delete").scalar()
            self.conn.exec_driver_sql("PRAGMA secure_delete=FAST")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.rollback()
        if self.sqlite:
            self.conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.conn.exec_driver_sql(f"PRAGMA secure_delete={int(self.secure_delete or 0)}")

    def done(self) -> None:
        self.conn.commit()
        self.committed += 1
        if self.sqlite and self.committed % CHECKPOINT_EVERY == 0:
            self.conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        time.sleep(self.pacer.rest())


def _prune_deliveries(
    batches: _Batches, retention: Retention, now: datetime, batch: int
) -> tuple[int, int]:
    """Walk the deliveries received before the later cutoff, oldest first: delete the done
    rows past `dedupe`, empty the bodies of done rows past `bodies`. A delivery is done after
    it was received, so a row received after both cutoffs can be neither.

    Each batch is read by primary key with what is due to each row, and its DELETE and
    UPDATE name rows by id only. Before the DELETE the rows' dedupe index entries are read
    (`read_keys_ahead`): old rows' index pages are the coldest in the store, and read inside
    the DELETE they would come from the disk holding the write lock.

    A statement that names the state lets the database pick the (state, turn, id) claim
    index, which on a big store reads every done row for each batch.
    Only done rows have a `done_at`, and a done row stays done, so the time alone keeps the
    statements to done rows."""
    conn = batches.conn
    body_cutoff, row_cutoff = now - retention.bodies, now - retention.dedupe
    # Built once for the pass: a statement built for each batch cost more Python time than
    # SQLite took to run it.
    search = _next_batch(body_cutoff, row_cutoff, batch)
    ids: BindParameter[Any] = bindparam("ids", expanding=True)
    remove = delete(Delivery).where(Delivery.id.in_(ids), Delivery.done_at < row_cutoff)
    empty = (
        update(Delivery)
        .where(Delivery.id.in_(ids), Delivery.done_at < body_cutoff)
        .values(body=literal(b"", LargeBinary()))
    )
    bodies = deliveries = 0
    last = 0
    while True:
        rows = conn.execute(search, {"last": last}).all()
        if not rows:
            conn.commit()
            return bodies, deliveries
        last = rows[-1].id
        gone = [row for row in rows if row.gone]
        emptied = [row.id for row in rows if row.emptied and not row.gone]
        if gone:
            digests = [row.body_sha256 for row in gone if row.body_sha256]
            read_keys_ahead(conn, [row.delivery_id for row in gone], digests)
            deliveries += conn.execute(remove, {"ids": [row.id for row in gone]}).rowcount
        if emptied:
            bodies += conn.execute(empty, {"ids": emptied}).rowcount
        batches.done()


def _next_batch(
    body_cutoff: datetime, row_cutoff: datetime, batch: int
) -> Select[int, str, str | None, bool | None, bool | None]:
    """The next `batch` deliveries after id `:last` received before either cutoff, in id
    order: each one's id and dedupe keys, whether its row is due to go and whether its body
    is. The state is read in the columns, not searched by, so the search walks the primary
    key."""
    done = Delivery.state == InboxState.DONE
    return (
        select(
            Delivery.id,
            Delivery.delivery_id,
            Delivery.body_sha256,
            (done & (Delivery.done_at < row_cutoff)).label("gone"),
            (done & (Delivery.done_at < body_cutoff) & (func.length(Delivery.body) > 0)).label(
                "emptied"
            ),
        )
        .where(Delivery.id > bindparam("last"), Delivery.received_at < max(body_cutoff, row_cutoff))
        .order_by(Delivery.id)
        .limit(batch)
    )


def _delete_in_batches(
    batches: _Batches,
    column: InstrumentedAttribute[Any],
    condition: ColumnElement[bool],
    batch: int,
) -> int:
    """Delete the rows `condition` picks, `batch` primary keys (`column`) at a time, each
    batch committed."""
    conn = batches.conn
    search = select(column).where(condition).limit(batch)
    remove = delete(column.class_).where(column.in_(bindparam("keys", expanding=True)))
    removed = 0
    while True:
        keys = list(conn.scalars(search))
        if keys:
            removed += conn.execute(remove, {"keys": keys}).rowcount
        batches.done()
        if len(keys) < batch:
            return removed


class PeriodicPrune:
    """Runs `prune` every `interval` seconds on a thread of its own (the first pass a minute
    after start, or sooner when the interval is shorter); `report` hears what each pass
    removed."""

    FIRST_PASS = 60.0

    def __init__(
        self,
        engine: Engine,
        retention: Retention,
        interval: float,
        clock: Callable[[], datetime],
        report: Callable[[Pruned], None] = lambda _pruned: None,
    ) -> None:
        self.engine = engine
        self.retention = retention
        self.interval = interval
        self.clock = clock
        self.report = report
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="store-prune", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        wait = min(self.interval, self.FIRST_PASS)
        while not self._stop.wait(wait):
            wait = self.interval
            try:
                self.report(prune(self.engine, self.retention, self.clock()))
            except Exception:  # the store is away: the next pass tries again
                log.exception("store prune failed")
