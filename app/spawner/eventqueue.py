"""The spawner's events: appended to `events.jsonl` in its state dir, then sent to the App.

The file is the outbox. `events.sent` holds how many bytes of it the App has acknowledged,
so events written while the App is down (or before a spawner restart) are sent when it is
back, in order, none lost. Each event carries an `id` the App records once, so a batch
resent after a crash between "App accepted" and "offset saved" is not counted twice. Lines
are written here, in the App's event shape, rather than through `app.audit`, which would
load the database layer into a process that never opens a database.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.files import write_text_atomic
from app.protocol import SPAWNER_EVENTS, current_record
from app.retry import Backoff
from app.spawner.appclient import AppClient, AppUnavailable, Rejected, Unauthorized

log = logging.getLogger(__name__)

BATCH = 200
MAX_BACKOFF = 30.0


def outgoing(event: dict[str, Any]) -> dict[str, Any]:
    """An event as sent: the App stamps its own `ts`; the spawner's clock is `reported_ts`.
    A line an older release left unsent goes with the item's id under today's key."""
    sent = {key: value for key, value in current_record(event).items() if key != "ts"}
    if "ts" in event:
        sent["reported_ts"] = event["ts"]
    return sent


class SpawnerEvents:
    """`emit` records an event locally and wakes the sender; `flush` sends what is unsent."""

    def __init__(self, state_dir: Path, client: AppClient | None = None) -> None:
        self.path = state_dir / "events.jsonl"
        self.offset_path = state_dir / "events.sent"
        self.client = client
        self._append_lock = threading.Lock()
        state_dir.mkdir(parents=True, exist_ok=True)
        self._wake = threading.Event()
        self._send_lock = threading.Lock()

    def emit(self, event: str, work_item_id: str | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event (the App's event shape: `ts`, `event`, `work_item_id`, fields).

        Only names the App accepts (`protocol.SPAWNER_EVENTS`) are recorded: any other would
        sit in the outbox, refused on every send."""
        if event not in SPAWNER_EVENTS:
            raise ValueError(f"`{event}` is not in app.protocol.SPAWNER_EVENTS")
        record = {
            "ts": datetime.now(UTC).isoformat(),
            "event": event,
            "work_item_id": work_item_id,
            "id": uuid.uuid4().hex,
            **fields,
        }
        line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
        with self._append_lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        level = logging.WARNING if fields.get("level") == "warning" else logging.INFO
        said = fields.get("message") or fields.get("reason") or ""
        log.log(level, "%s %s%s", event, work_item_id or "", f": {said}" if said else "")
        self._wake.set()
        return record

    def _offset(self) -> int:
        try:
            return int(self.offset_path.read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _save_offset(self, offset: int) -> None:
        write_text_atomic(self.offset_path, str(offset))

    def _pending(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Up to BATCH complete lines after `offset`, and the offset after them."""
        if not self.path.exists():
            return [], offset
        events: list[dict[str, Any]] = []
        with self.path.open("rb") as fh:
            fh.seek(offset)
            while len(events) < BATCH:
                line = fh.readline()
                if not line.endswith(b"\n"):
                    break  # nothing more, or a line still being written
                offset += len(line)
                try:
                    events.append(json.loads(line))
                except ValueError:
                    log.warning("skipping an unreadable line in %s", self.path)
        return events, offset

    def flush(self) -> bool:
        """Send every unsent event; True when nothing is left. Raises AppUnavailable /
        Unauthorized for the caller's backoff."""
        if self.client is None:
            return True
        with self._send_lock:
            while True:
                start = self._offset()
                events, end = self._pending(start)
                if not events:
                    if end != start:
                        self._save_offset(end)
                    return True
                try:
                    answer = self.client.events([outgoing(event) for event in events])
                except Rejected as exc:  # the whole batch is malformed: keep it local only
                    log.error("the App refused %d events: %s", len(events), exc)
                    answer = {}
                for rejected in answer.get("rejected", []):
                    log.warning("the App rejected an event: %s", rejected)
                self._save_offset(end)

    def unsent(self) -> int:
        """How many complete events are waiting to be sent."""
        count, offset = 0, self._offset()
        while True:
            events, offset = self._pending(offset)
            if not events:
                return count
            count += len(events)

    def run(self, stop: threading.Event, *, interval: float = 5.0) -> None:
        """The sender loop: send when woken (or every `interval`), back off while the App is
        unreachable, until `stop` is set."""
        backoff = Backoff(cap=MAX_BACKOFF)
        while not stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            try:
                self.flush()
                backoff.reset()
            except (AppUnavailable, Unauthorized) as exc:
                delay = backoff.next()
                log.warning("events not sent yet (%s); retrying in %.1fs", exc, delay)
                stop.wait(delay)
                self._wake.set()
