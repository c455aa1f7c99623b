"""Durable intake of webhook deliveries with group commit.

Request threads hand a verified delivery to the process's one writer thread and wait; the
writer stores everything that arrived meanwhile in a single transaction (inbox rows and their
`webhook.received` events), commits, and only then releases the waiting requests to answer
202. One writer per process means no lock contention between request threads, and one commit
covers many deliveries under load while costing nothing extra when idle.
"""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.events import EventLog, event_record
from app.store.models import Delivery, Event

MAX_BATCH = 500
WAIT_SECONDS = 15.0


class IngestUnavailable(RuntimeError):
    """The delivery could not be stored; the caller answers 503 so GitHub can redeliver."""


@dataclass
class _Pending:
    delivery_id: str
    event: str
    action: str | None
    body: bytes
    done: threading.Event = field(default_factory=threading.Event)
    new: bool = False
    error: BaseException | None = None


class IngestWriter:
    def __init__(self, engine: Engine, events: EventLog) -> None:
        self.engine = engine
        self.events = events
        dialect_insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
        self._insert = (
            dialect_insert(Delivery)
            .on_conflict_do_nothing(index_elements=["delivery_id"])
            .returning(Delivery.delivery_id)
        )
        self._queue: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def store(self, delivery_id: str, event: str, action: str | None, body: bytes) -> bool:
        """Store one delivery durably; True when new, False for a repeated delivery id."""
        self._ensure_started()
        item = _Pending(delivery_id, event, action, body)
        self._queue.put(item)
        if not item.done.wait(WAIT_SECONDS):
            raise IngestUnavailable("the store did not answer in time")
        if item.error is not None:
            raise IngestUnavailable(str(item.error)) from item.error
        return item.new

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ingest-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[_Pending]) -> None:
        now = datetime.now(UTC)
        rows = [
            {"delivery_id": item.delivery_id, "event": item.event, "action": item.action,
             "body": item.body, "state": "queued", "attempts": 0, "next_attempt_at": now,
             "received_at": now}
            for item in batch
        ]  # fmt: skip
        try:
            with self.engine.begin() as conn:
                # One multi-row INSERT … ON CONFLICT DO NOTHING RETURNING for the whole batch:
                # the ids it returns are the deliveries not seen before.
                inserted = {row.delivery_id for row in conn.execute(self._insert, rows)}
                lines, events = self._received_events(batch, inserted, now)
                if events:
                    conn.execute(insert(Event), events)
        except Exception as exc:  # the store is down or refused: every waiter answers 503
            for item in batch:
                item.error = exc
                item.done.set()
            return
        self.events.append_lines(lines)
        for item in batch:
            item.done.set()

    @staticmethod
    def _received_events(
        batch: list[_Pending], inserted: set[str], now: datetime
    ) -> tuple[list[str], list[dict[str, Any]]]:
        lines: list[str] = []
        events: list[dict[str, Any]] = []
        seen: set[str] = set()
        for item in batch:
            # A delivery id repeated inside one batch is new only the first time.
            item.new = item.delivery_id in inserted and item.delivery_id not in seen
            seen.add(item.delivery_id)
            if not item.new:
                continue
            fields = {"delivery": item.delivery_id, "gh_event": item.event, "action": item.action}
            record = event_record("webhook.received", None, fields, now)
            lines.append(json.dumps(record, separators=(",", ":")))
            events.append({"ts": now, "event": "webhook.received", "work_item": None,
                           "data": record})  # fmt: skip
        return lines, events
