"""The audit trail: append-only JSON lines in `events.jsonl` and, in the App, an events table.

`{"ts", "event", "work_item", …}` — one shape for both, so an operator can answer "what did
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
from sqlalchemy.orm import Session

from app.store.models import Event


def _now() -> datetime:
    return datetime.now(UTC)


def event_line(event: str, work_item: str | None, fields: dict[str, Any], ts: datetime) -> str:
    record = {"ts": ts.isoformat(), "event": event, "work_item": work_item, **fields}
    return json.dumps(record, default=str, separators=(",", ":"))


class EventLog:
    """Writes events to `path` (JSON lines) and, when an engine is given, to the events table."""

    def __init__(self, path: Path | None, engine: Engine | None = None) -> None:
        self.path = path
        self.engine = engine
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def emit(
        self,
        event: str,
        work_item: str | None = None,
        *,
        session: Session | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Record one event. With `session`, the table row joins that transaction."""
        ts = _now()
        line = event_line(event, work_item, fields, ts)
        if self.path is not None:
            with self._lock:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, (line + "\n").encode())
                finally:
                    os.close(fd)
        row = {"ts": ts, "event": event, "work_item": work_item, "data": json.loads(line)}
        if session is not None:
            session.execute(insert(Event).values(**row))
        elif self.engine is not None:
            with self.engine.begin() as conn:
                conn.execute(insert(Event).values(**row))
        return json.loads(line)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Every event in a JSON-lines file, skipping a torn last line."""
    if not path.exists():
        return
    with path.open() as fh:
        for line in fh:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
