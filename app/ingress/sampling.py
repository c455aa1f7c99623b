"""What anyone on the network can make the App record — a refused request, a replayed ping —
costs a counter, not a row.

Each such event is counted by kind in memory. Within each wall-clock minute only the first
`per_minute` become rows (in the events table and `events.jsonl`); when the minute is over,
one summary row (`SUMMARY`) records how many of each kind there were. So a process writes at
most `per_minute + 1` rows a minute however many requests arrive, every field of a sampled
row is cut to `FIELD_LIMIT` characters, and the kinds are the App's own words, never the
sender's: a flood grows the store by a bounded amount per minute, not per request.

The timer that writes a minute's summary when nothing else arrives belongs to the App's
`SampledLog`: the App's shutdown (`close`) writes the minute under way, cancels it and arms
no other, so no summary is written after its App (and its database) is gone.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from app.audit import EventLog

PER_MINUTE = 3
FIELD_LIMIT = 100
SUMMARY = "ingress.counted"
Record = tuple[str, dict[str, Any]]


def cut(value: Any, limit: int = FIELD_LIMIT) -> Any:
    """A sender-chosen value as it may be stored or logged: strings cut to `limit`."""
    return value[:limit] if isinstance(value, str) else value


class SampledLog:
    """Counts events by kind; hands back the few a minute that are worth a row."""

    def __init__(
        self,
        events: EventLog,
        per_minute: int = PER_MINUTE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.events = events
        self.per_minute = per_minute
        self.clock = clock
        self.totals: Counter[str] = Counter()
        self._minute: int | None = None
        self._counts: Counter[str] = Counter()
        self._sampled = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def note(self, kind: str, name: str, fields: Mapping[str, Any]) -> list[Record]:
        """Count one event of `kind`; returns the rows to write now: the summary of a minute
        that has just ended, and this event itself when it is among its minute's first few."""
        minute = int(self.clock() // 60)
        with self._lock:
            out = self._roll(minute)
            if self._minute is None:
                self._minute = minute
                if not self._closed:
                    self._arm(minute)
            self.totals[kind] += 1
            self._counts[kind] += 1
            if self._sampled < self.per_minute:
                self._sampled += 1
                out.append((name, {key: cut(value) for key, value in fields.items()}))
        return out

    def record(self, kind: str, name: str, fields: Mapping[str, Any]) -> None:
        """`note`, then write what it hands back."""
        self.write(self.note(kind, name, fields))

    def write(self, records: list[Record]) -> None:
        for name, fields in records:
            self.events.emit(name, **fields)

    def close(self) -> None:
        """Write the summary of the minute under way and stop timing minutes (the App's
        shutdown): what is counted after it waits for a later `note` or `close`."""
        with self._lock:
            self._closed = True
            out = self._roll(None)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self.write(out)

    def _roll(self, minute: int | None) -> list[Record]:
        """The summary of the window being closed (when `minute` starts a new one)."""
        if self._minute is None or self._minute == minute:
            return []
        start = datetime.fromtimestamp(self._minute * 60, UTC).isoformat()
        summary = {"minute": start, "counts": dict(self._counts), "sampled": self._sampled}
        self._minute, self._counts, self._sampled = None, Counter(), 0
        return [(SUMMARY, summary)]

    def _arm(self, minute: int) -> None:
        """Write this minute's summary soon after it ends, even if nothing else arrives."""
        if self._timer is not None:
            self._timer.cancel()  # an earlier minute's, rolled over by `note`
        delay = max(0.0, (minute + 1) * 60 - self.clock()) + 1.0
        self._timer = threading.Timer(delay, self._ended, args=(minute,))
        self._timer.daemon = True
        self._timer.start()

    def _ended(self, minute: int) -> None:
        with self._lock:
            out = self._roll(None) if self._minute == minute else []
        self.write(out)
