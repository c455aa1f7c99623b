"""Retention: what the store forgets, and when.

- a done delivery's body, after `bodies` (the row stays: it still answers for dedupe);
- a done delivery's row — its delivery id and body hash, the dedupe keys — after `dedupe`;
- event rows, after `events`;
- the ids of events spawners reported (kept so a resent batch is not counted twice), after
  `spawner_event_ids`.

Queued and parked deliveries are never touched: a parked one waits for an operator.

Every pass works in batches of `batch` rows, each its own short transaction, with a pause
between them, so a webhook's write never waits behind more than one batch (on SQLite the
batch's connection holds the file's write lock only from its first write to its commit).
Rows are found by primary key from where the last batch stopped, and the search is a read
that takes no lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, LargeBinary, delete, func, literal, select, update
from sqlalchemy.orm import InstrumentedAttribute

from app.store.tables import Delivery, Event, InboxState, Once

log = logging.getLogger(__name__)

BATCH = 500
PAUSE = 0.005  # seconds between batches: a waiting writer gets the lock first
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
    pruned.bodies, pruned.deliveries = _prune_deliveries(engine, retention, now, batch, pause)
    pruned.events = _delete_in_batches(
        engine, Event.id, Event.ts < now - retention.events, batch, pause
    )
    pruned.spawner_event_ids = _delete_in_batches(
        engine,
        Once.key,
        Once.key.startswith(SPAWNER_EVENT_KEY)
        & (Once.created_at < now - retention.spawner_event_ids),
        batch,
        pause,
    )
    return pruned


def _prune_deliveries(
    engine: Engine, retention: Retention, now: datetime, batch: int, pause: float
) -> tuple[int, int]:
    """Walk done deliveries received before the younger cutoff, oldest first: delete the rows
    past `dedupe`, empty the bodies past `bodies`. A delivery is done after it was received,
    so a row received after both cutoffs can be neither."""
    body_cutoff, row_cutoff = now - retention.bodies, now - retention.dedupe
    latest = max(body_cutoff, row_cutoff)
    done = Delivery.state == InboxState.DONE
    bodies = deliveries = 0
    last = 0
    while True:
        with engine.connect() as conn:
            ids = list(
                conn.scalars(
                    select(Delivery.id)
                    .where(Delivery.id > last, done, Delivery.received_at < latest)
                    .order_by(Delivery.id)
                    .limit(batch)
                )
            )
            if not ids:
                return bodies, deliveries
            last = ids[-1]
            in_batch = Delivery.id.in_(ids)
            gone = conn.execute(
                delete(Delivery).where(in_batch, done, Delivery.done_at < row_cutoff)
            )
            emptied = conn.execute(
                update(Delivery)
                .where(
                    in_batch,
                    done,
                    Delivery.done_at < body_cutoff,
                    func.length(Delivery.body) > 0,
                )
                .values(body=literal(b"", LargeBinary()))
            )
            conn.commit()
        deliveries += gone.rowcount
        bodies += emptied.rowcount
        time.sleep(pause)


def _delete_in_batches(
    engine: Engine,
    column: InstrumentedAttribute[Any],
    condition: ColumnElement[bool],
    batch: int,
    pause: float,
) -> int:
    """Delete the rows `condition` picks, `batch` primary keys (`column`) at a time, each
    batch committed."""
    table = column.class_
    removed = 0
    while True:
        with engine.connect() as conn:
            keys = list(conn.scalars(select(column).where(condition).limit(batch)))
            if not keys:
                return removed
            removed += conn.execute(delete(table).where(column.in_(keys))).rowcount
            conn.commit()
        if len(keys) < batch:
            return removed
        time.sleep(pause)


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
