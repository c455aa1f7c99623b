"""Durable intake of webhook deliveries with group commit.

Requests (threads under WSGI, coroutines under ASGI) hand a verified delivery to the
process's one writer thread and wait; the writer stores everything that arrived meanwhile in
a single transaction, commits, and only then
releases the waiting requests to answer 202. One writer per process means no lock contention
between requests, and one commit covers many deliveries under load while costing nothing
extra when idle.

A delivery is new when neither its delivery id nor its body (by SHA-256) was stored before:
the signature covers the body only, so a signed body replayed under a fresh delivery id is a
repeat, not a second delivery.

A routed delivery gets its lane's fair turn (`app.store.lanes`): a flood on one issue is
queued behind what other issues send meanwhile, not in front of it.

The same transaction records `webhook.received` for each new delivery. A delivery no handler
acts on (`routed` says which; most of what GitHub sends is such) is stored already done: it
is kept for dedupe and audit, and the worker never has to touch it.

On SQLite the writer's connection takes the file's `WriteLock` at its first write, like every
connection of the App (writers in other threads and processes queue rather than poll), and
the writer has the process's `WalCheckpointer` run (`look_after`), so no commit of the
process stops to copy the WAL into the database file. Its statement journals stay in memory
(`statement_journals_in_memory`): a large batch writes no temporary file while it holds
the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from sqlalchemy import Connection, Dialect, Engine

from app.audit import EventLog, event_line
from app.github.github_errors import GitHubError
from app.store import (
    Delivery,
    Event,
    InboxState,
    Origin,
    Turns,
    compress_body,
    driver_time,
    look_after,
    statement_journals_in_memory,
)

MAX_BATCH = 500
RECEIVED = "webhook.received"  # the event each new delivery records
WAIT_SECONDS = 15.0
# A batch of more than PRESSED_BATCH deliveries means acknowledgements wait on the writer
# (`IngestWriter.pressed`), and for PRESSURE_HOLD seconds after it handlers in this process
# step back. Two or three together is ordinary traffic: under steady routed deliveries,
# counting every batch of two made the handlers step back most of the time and fall behind
# (`bench/e2e.py`); a flood makes batches larger than that.
PRESSURE_HOLD = 0.05
PRESSED_BATCH = 3


class IngestUnavailable(GitHubError, RuntimeError):
    """The delivery could not be stored; the caller answers 503 so GitHub can redeliver."""


_TIMED_OUT = IngestUnavailable("the store did not answer in time")


# Whether a delivery was new, or why it could not be stored.
Outcome = tuple[bool, BaseException | None]


@dataclass
class _Pending:
    """A delivery waiting for the writer, and who waits for it: a thread (`done`, called on
    the writer thread) or a coroutine (`future`, settled on its own event loop)."""

    delivery_id: str
    event: str
    action: str | None
    body: bytes
    digest: str
    lane: str
    origin: str = Origin.PUSHED
    done: Callable[[bool, BaseException | None], None] | None = None
    future: asyncio.Future[Outcome] | None = None


def _pending(
    delivery_id: str,
    event: str,
    action: str | None,
    body: bytes,
    lane: str,
    origin: str = Origin.PUSHED,
    **waiter: Any,
) -> _Pending:
    digest = hashlib.sha256(body).hexdigest()
    compressed = compress_body(body)
    return _Pending(delivery_id, event, action, compressed, digest, lane, origin, **waiter)


class _BatchSQL:
    """The writer's statements as the driver's SQL.

    On PostgreSQL a batch is one statement (`batch`) run in autocommit: the deliveries'
    multi-row INSERT … ON CONFLICT DO NOTHING RETURNING (the ids it returns are the ones not
    seen before), and the events' INSERT reading that RETURNING in a data-modifying WITH. One
    round trip a batch instead of four (BEGIN, deliveries, events, COMMIT), each of which
    waited for the server's process to be scheduled on a machine busy acknowledging.

    On SQLite a batch is two multi-row INSERTs in one transaction, with no RETURNING and no
    executemany: the driver lets go of the GIL for every row it steps through, and under a
    flood each time cost the writer up to a GIL switch interval to get it back from the busy
    event loop. Which deliveries were new follows from the INSERT's row count and last rowid
    (`stored_between` looks them up only when some were not).

    Driver SQL rather than Core statements, because Core processes every value of every row:
    a batch's one timestamp formatted four times per delivery, the events statement's cache
    key built per batch — about half the writer's time on a batch of ten, much of it with
    the SQLite write lock held. The timestamp goes through `driver_time`, once per batch.
    """

    COLUMNS = (
        "delivery_id",
        "event",
        "action",
        "body",
        "body_sha256",
        "attempts",
        "next_attempt_at",
        "received_at",
        "state",
        "done_at",
        "turn",
        "origin",
    )

    def __init__(self, dialect: Dialect) -> None:
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        self._row = "(" + ", ".join([mark] * len(self.COLUMNS)) + ")"
        self._head = f"INSERT INTO {Delivery.__tablename__} ({', '.join(self.COLUMNS)}) VALUES "
        self._tail = " ON CONFLICT DO NOTHING"
        self.one_statement = dialect.name == "postgresql"
        # SQLite's: the events of the new deliveries, and the rows one INSERT stored.
        self._events_head = (
            f"INSERT INTO {Event.__tablename__} (ts, event, work_item_id, data) VALUES "
        )
        self.stored_between = (
            f"SELECT delivery_id FROM {Delivery.__tablename__} WHERE id > ? AND id <= ?"
        )
        self.moment = driver_time(dialect)

    def deliveries(self, count: int) -> str:
        """The deliveries' INSERT, skipping those already stored."""
        return self._head + ", ".join([self._row] * count) + self._tail

    def events(self, count: int) -> str:
        """SQLite: `count` events in one INSERT; parameters (ts, event, work_item_id, data)."""
        return self._events_head + ", ".join(["(?, ?, ?, ?)"] * count)

    def batch(self, deliveries: int, lines: int) -> str:
        """PostgreSQL: the deliveries' INSERT, and the events of those it stored, in one
        statement. Parameters: the deliveries' values, the time and the event's name, then
        (order, delivery id, line) for each line; returns the ids stored."""
        lines_rows = ", ".join(["(%s, %s, %s)"] * lines)
        return (
            f"WITH new AS ({self.deliveries(deliveries)} RETURNING delivery_id), logged AS ("
            f"INSERT INTO {Event.__tablename__} (ts, event, work_item_id, data) "
            "SELECT %s, %s, NULL, CAST(line.data AS JSON) "
            f"FROM (VALUES {lines_rows}) AS line(ord, delivery_id, data) "
            "JOIN new ON new.delivery_id = line.delivery_id ORDER BY line.ord) "
            "SELECT delivery_id FROM new"
        )


def _settle(outcomes: list[tuple[asyncio.Future[Outcome], Outcome]]) -> None:
    for future, outcome in outcomes:
        if not future.done():  # it may have timed out
            future.set_result(outcome)


class IngestWriter:
    def __init__(
        self,
        engine: Engine,
        events: EventLog,
        routed: Callable[[str, str | None], bool] = lambda _event, _action: True,
        wait_seconds: float = WAIT_SECONDS,
        pressure_hold: float = PRESSURE_HOLD,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.engine = engine
        self.events = events
        self.routed = routed
        self.wait_seconds = wait_seconds  # then a waiting request answers 503
        self.pressure_hold = pressure_hold
        self.clock = clock  # what a batch records as received, and its turns count from
        self._sql = _BatchSQL(engine.dialect)
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._checkpoints_done: Callable[[], None] | None = None  # `look_after`'s release
        self._conn: Connection | None = None
        self._start_lock = threading.Lock()
        self._pressed_until = 0.0
        self._turns = Turns()  # used by the writer thread only

    def pressed(self) -> bool:
        """Whether acknowledgements are waiting on this writer: a recent batch held more than
        PRESSED_BATCH deliveries (they arrived faster than its commits), so the process's CPU
        and the database's write lock are better spent acknowledging than handling."""
        return time.monotonic() < self._pressed_until

    def store(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        body: bytes,
        lane: str = "",
        origin: str = Origin.PUSHED,
    ) -> bool:
        """Store one delivery durably; True when new, False for a repeated delivery id or
        body. `lane` is what it is about (store/lanes.py), for its fair turn; `origin` how it
        came (POSTed, or read from GitHub's delivery log)."""
        finished = threading.Event()
        outcome: list[Any] = []

        def done(new: bool, error: BaseException | None) -> None:
            outcome.extend((new, error))
            finished.set()

        self._submit(_pending(delivery_id, event, action, body, lane, origin, done=done))
        if not finished.wait(self.wait_seconds):
            raise IngestUnavailable("the store did not answer in time")
        return self._outcome(*outcome)

    async def store_async(
        self, delivery_id: str, event: str, action: str | None, body: bytes, lane: str = ""
    ) -> bool:
        """`store` for a coroutine: the event loop serves other requests meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        # A plain timer rather than `asyncio.timeout`, which costs a request more CPU.
        timed_out: list[tuple[asyncio.Future[Outcome], Outcome]] = [(future, (False, _TIMED_OUT))]
        timer = loop.call_later(self.wait_seconds, _settle, timed_out)
        self._submit(_pending(delivery_id, event, action, body, lane, future=future))
        try:
            new, error = await future
        finally:
            timer.cancel()
        return self._outcome(new, error)

    @staticmethod
    def _outcome(new: bool, error: BaseException | None) -> bool:
        if error is not None:
            raise IngestUnavailable(str(error)) from error
        return new

    def close(self) -> None:
        """Stop the writer (after what is queued) and the checkpointer; for tests and exit."""
        with self._start_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=self.wait_seconds)
        if self._checkpoints_done is not None:
            self._checkpoints_done()
            self._checkpoints_done = None

    def _submit(self, item: _Pending) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="ingest-writer", daemon=True
                    )
                    self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        if self._checkpoints_done is None:
            self._checkpoints_done = look_after(self.engine)
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                while len(batch) < MAX_BATCH:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        self._write(batch)
                        return
                    batch.append(item)
                self._write(batch)
                if len(batch) > PRESSED_BATCH:
                    self._pressed_until = time.monotonic() + self.pressure_hold
        finally:
            if self._conn is not None:
                with contextlib.suppress(Exception):  # a broken one is closed all the same
                    driver = self._conn.connection.driver_connection
                    statement_journals_in_memory(driver, False)  # back to the pool's default
                self._conn.close()
                self._conn = None

    def _connection(self) -> Connection:
        """The writer's own connection, held across batches."""
        if self._conn is None:
            self._conn = self.engine.connect()
            if self._sql.one_statement:  # the batch's one statement commits by itself
                self._conn.execution_options(isolation_level="AUTOCOMMIT")
            statement_journals_in_memory(self._conn.connection.driver_connection)
        return self._conn

    def _write(self, batch: list[_Pending]) -> None:
        now = self.clock()
        now_ms = int(now.timestamp() * 1000)
        moment = self._sql.moment(now)
        values: list[Any] = []
        lines: dict[str, str] = {}  # each delivery's webhook.received as a JSON line
        for item in batch:
            routed = self.routed(item.event, item.action)
            values += (
                item.delivery_id,
                item.event,
                item.action,
                item.body,
                item.digest,
                0,  # attempts
                moment,  # next_attempt_at
                moment,  # received_at
                str(InboxState.QUEUED if routed else InboxState.DONE),
                None if routed else moment,  # done_at
                self._turns.take(item.lane, now_ms) if routed else now_ms,
                item.origin,
            )
            fields = {
                "delivery": item.delivery_id,
                "gh_event": item.event,
                "action": item.action,
                "routed": routed,
            }
            if item.origin != Origin.PUSHED:
                fields["origin"] = item.origin
            lines[item.delivery_id] = event_line(RECEIVED, None, fields, now)
        try:
            conn = self._connection()
            with conn.begin():
                if self._sql.one_statement:
                    logged = [(n, *line) for n, line in enumerate(lines.items())]
                    params = [*values, moment, RECEIVED, *chain.from_iterable(logged)]
                    sql = self._sql.batch(len(batch), len(logged))
                    inserted = {row[0] for row in conn.exec_driver_sql(sql, tuple(params))}
                else:
                    ids = [item.delivery_id for item in batch]
                    inserted = self._store_sqlite(conn, ids, values)
                    events = [
                        (moment, RECEIVED, None, line)
                        for delivery, line in lines.items()
                        if delivery in inserted
                    ]
                    if events:
                        sql = self._sql.events(len(events))
                        conn.exec_driver_sql(sql, tuple(chain.from_iterable(events)))
        except Exception as exc:  # the store is down or refused: every waiter answers 503
            self._discard_connection()
            self._finish([(item, (False, exc)) for item in batch])
            return
        new_lines = [line for delivery, line in lines.items() if delivery in inserted]
        self.events.append_lines(new_lines)
        seen: set[str] = set()
        outcomes: list[tuple[_Pending, Outcome]] = []
        for item in batch:
            # A delivery id repeated inside one batch is new only the first time.
            outcomes.append(
                (item, (item.delivery_id in inserted and item.delivery_id not in seen, None))
            )
            seen.add(item.delivery_id)
        self._finish(outcomes)

    def _store_sqlite(self, conn: Connection, ids: list[str], values: list[Any]) -> set[str]:
        """Insert a batch's deliveries; the ids of those it stored. All of them is the common
        case. Otherwise the ones it stored are the rows after the table's last before it:
        the write lock is held, and SQLite gives each new row the next rowid."""
        stored = conn.exec_driver_sql(self._sql.deliveries(len(ids)), tuple(values))
        added, last = stored.rowcount, stored.lastrowid
        if added == len(ids):
            return set(ids)
        if added <= 0:
            return set()
        rows = conn.exec_driver_sql(self._sql.stored_between, (last - added, last))
        return {row[0] for row in rows}

    @staticmethod
    def _finish(outcomes: list[tuple[_Pending, Outcome]]) -> None:
        """Tell every waiter; coroutines get one wake-up per event loop per batch."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Outcome], Outcome]]]
        by_loop = {}
        for item, outcome in outcomes:
            if item.future is not None:
                by_loop.setdefault(item.future.get_loop(), []).append((item.future, outcome))
            elif item.done is not None:
                item.done(*outcome)
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                loop.call_soon_threadsafe(_settle, settled)

    def _discard_connection(self) -> None:
        """After a failed batch start the next one on a fresh connection (a PostgreSQL
        restart leaves the held one broken)."""
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:  # already unusable; dropping it is the point
                pass
            self._conn = None
