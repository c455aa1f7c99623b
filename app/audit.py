"""The audit trail: append-only JSON lines in `events.jsonl` and, in the App, an events table.

`{"ts", "event", "work_item_id", …}` — one shape for both, so an operator can answer "what did
the-loop launch, and why" from the file alone.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session

from app.protocol import current_record
from app.store import Event

_PENDING = "the-loop.pending-event-lines"


def _now() -> datetime:
    return datetime.now(UTC)


def event_record(
    event: str, work_item_id: str | None, fields: dict[str, Any], ts: datetime
) -> dict[str, Any]:
    """The one shape of an event, in the file and in the table's `data`."""
    return {"ts": ts.isoformat(), "event": event, "work_item_id": work_item_id, **fields}


def event_line(event: str, work_item_id: str | None, fields: dict[str, Any], ts: datetime) -> str:
    record = event_record(event, work_item_id, fields, ts)
    return json.dumps(record, default=str, separators=(",", ":"))


class EventLog:
    """Writes events to `path` (JSON lines) and, when an engine is given, to the events table.

    An event emitted inside a session's transaction reaches the file only if that
    transaction commits, so the file and the table never disagree about what happened.
    """

    def __init__(self, path: Path | None, engine: Engine | None = None) -> None:
        self.path = path
        self.engine = engine
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def append_lines(self, lines: list[str]) -> None:
        """Append whole lines in one write, so concurrent writers never interleave a line."""
        if self.path is None or not lines:
            return
        data = "".join(line + "\n" for line in lines).encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def emit(
        self,
        event: str,
        work_item_id: str | None = None,
        *,
        session: Session | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Record one event. With `session`, it joins that transaction (file written on commit)."""
        ts = _now()
        line = event_line(event, work_item_id, fields, ts)
        record: dict[str, Any] = json.loads(line)
        row = {"ts": ts, "event": event, "work_item_id": work_item_id, "data": record}
        if session is not None:
            session.execute(insert(Event).values(**row))
            self._after_commit(session, line)
            return record
        if self.engine is not None:
            with self.engine.begin() as conn:
                conn.execute(insert(Event).values(**row))
        self.append_lines([line])
        return record

    def _after_commit(self, session: Session, line: str) -> None:
        pending: list[str] | None = session.info.get(_PENDING)
        if pending is None:
            pending = session.info[_PENDING] = []

            def flush(sess: Session) -> None:
                self.append_lines(sess.info.pop(_PENDING, []))

            def discard(sess: Session) -> None:
                sess.info.pop(_PENDING, None)

            sa_event.listen(session, "after_commit", flush, once=True)
            sa_event.listen(session, "after_rollback", discard, once=True)
        pending.append(line)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Every event in a JSON-lines file, skipping a torn last line; lines an older release
    wrote read with today's keys."""
    if not path.exists():
        return
    with path.open() as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            yield current_record(record) if isinstance(record, dict) else record
