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

from app.events import EventLog, event_line
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
            .returning(Delivery.id)
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
        lines: list[str] = []
        try:
            now = datetime.now(UTC)
            with self.engine.begin() as conn:
                events: list[dict[str, Any]] = []
                for item in batch:
                    params = {
                        "delivery_id": item.delivery_id,
                        "event": item.event,
                        "action": item.action,
                        "body": item.body,
                        "state": "queued",
                        "attempts": 0,
                        "next_attempt_at": now,
                        "received_at": now,
                    }
                    item.new = conn.execute(self._insert, params).scalar() is not None
                    if item.new:
                        fields = {
                            "delivery": item.delivery_id,
                            "gh_event": item.event,
                            "action": item.action,
                        }
                        line = event_line("webhook.received", None, fields, now)
                        lines.append(line)
                        events.append(
                            {
                                "ts": now,
                                "event": "webhook.received",
                                "work_item": None,
                                "data": json.loads(line),
                            }
                        )
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
