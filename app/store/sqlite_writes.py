"""Keeping SQLite writes off each other's toes when several App processes share one file.

Two things measured with `bench/ingest.py` made acknowledgements slow on SQLite, and both are
about the hot path waiting on something it should not wait for:

- **Writers polling for the lock.** SQLite's busy handler sleeps 1, 2, 5, 10… ms between
  attempts, and a group-committing writer in one gunicorn worker can starve its twin in
  another for hundreds of milliseconds; a handler's transaction in the same process did the
  same to the ingest writer. `WriteLock` queues writers on a thread lock and a blocking
  `flock` instead, so the next writer starts the moment the last one commits, and every
  SQLite connection the App opens (`LockingConnection`) takes it at its first write: the
  ingest writer, handlers, claims, the API, commands, migrations.
- **Checkpoints inside a commit.** With automatic checkpoints, the commit that crosses the
  threshold copies the whole WAL into the database file and syncs it, holding the write
  lock. While a `WalCheckpointer` (`app.store.wal_checkpoints`) does that work for the
  process, no `LockingConnection` of the process checkpoints in a commit.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

# How long a writer waits for the other threads of its process (SQLite's busy timeout too).
LOCK_TIMEOUT = 30.0
# A transaction holding the lock longer than this (seconds) is logged: every webhook waited.
SLOW_HOLD = 0.25
# SQLite's default: WAL pages after which a commit checkpoints, where no checkpointer runs.
SQLITE_AUTOCHECKPOINT = 1000


class StoreError(Exception):
    """The database could not take or keep what was asked of it. The room's one exception
    root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""


def sqlite_path(engine: Engine) -> Path | None:
    """The database file behind a SQLite engine; None for PostgreSQL or an in-memory db."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    return Path(database)


class WriteLockTimeout(StoreError, sqlite3.OperationalError):
    """The write lock was not had in time: the caller's transaction fails and is retried, as
    it would for SQLite's own "database is locked"."""


class WriteLock:
    """One writer at a time across the threads and processes that use the same SQLite file.

    A thread lock orders this process's threads; `flock` on `<db>-writelock` orders
    processes (flock is held per open file, so threads of one process would share it).
    The file is reopened after a fork so a child never shares its parent's lock.

    Waiting for the thread lock is bounded by a timeout, and a thread that already holds the
    lock (through another connection) is refused at once: a thread of this process can never
    wait forever on itself or on a sibling that waits on it.
    """

    def __init__(self, db_path: Path, timeout: float = LOCK_TIMEOUT) -> None:
        self.path = db_path.with_name(db_path.name + "-writelock")
        self.timeout = timeout
        self._thread_lock = threading.Lock()
        self._owner: int | None = None
        self._fd = -1
        self._pid = -1

    def _file(self) -> int:
        if self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd

    def acquire(self, timeout: float | None = None) -> None:
        if self._owner == threading.get_ident():
            raise WriteLockTimeout(
                f"this thread already holds the write lock of {self.path.name}: a second "
                "connection writing now would wait on the first forever"
            )
        wait = self.timeout if timeout is None else timeout
        if not self._thread_lock.acquire(timeout=wait):
            raise WriteLockTimeout(f"the write lock of {self.path.name} was busy for {wait:g} s")
        try:
            fcntl.flock(self._file(), fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise
        self._owner = threading.get_ident()

    def release(self) -> None:
        self._owner = None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_locks: dict[Path, WriteLock] = {}
_locks_guard = threading.Lock()


def lock_for_file(path: Path) -> WriteLock:
    """The one write lock of a SQLite file in this process."""
    key = path.resolve()
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = WriteLock(key)
        return lock


_checkpointed: dict[Path, int] = {}  # files a running WalCheckpointer of this process copies
_checkpointed_guard = threading.Lock()


def checkpointed_here(path: Path) -> bool:
    """Whether a WalCheckpointer of this process copies the WAL of the file at `path` (a
    resolved path: every connection asks at each write, so it is not resolved again)."""
    return _checkpointed.get(path, 0) > 0


def count_checkpointer(path: Path, change: int) -> None:
    """A WalCheckpointer of this process starts (+1) or stops (-1) copying the WAL of the
    file at `path` (resolved); the process's connections follow at their next write."""
    with _checkpointed_guard:
        left = _checkpointed.get(path, 0) + change
        if left > 0:
            _checkpointed[path] = left
        else:
            _checkpointed.pop(path, None)


def note_hold(seconds: float, holder: str) -> None:
    """Log a hold of the write lock past SLOW_HOLD (every other writer, webhooks included,
    waited this long), naming the holder: a transaction's first statement, or the
    checkpointer's locked pass. `bench/retention.py` counts these lines."""
    if seconds > SLOW_HOLD:
        log.warning("SQLite write lock held %.0f ms from: %.120s", seconds * 1000, holder)


def statement_journals_in_memory(dbapi_connection: Any, wanted: bool = True) -> None:
    """Keep a SQLite connection's statement journals in memory (`wanted`), or back at the
    build's default (temporary files); anything but a SQLite connection is left as it is.

    Inside a transaction SQLite journals every existing page a multi-row statement changes,
    so that statement alone can be undone. Past 64 KiB of them (a batch of some ten
    deliveries: their random ids and digests land on a page each in two indexes) it spills
    the journal to a new file in the temporary directory: created, unlinked and written a
    page at a time while every writer of the file waits on the lock. In memory the journal
    costs what the statement changes, which the caller bounds (the ingest writer's batch).
    PRAGMA temp_store also keeps temporary tables and sorts in memory, so it is for
    connections whose statements are known, never for the pool at large."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        store = "MEMORY" if wanted else "DEFAULT"
        dbapi_connection.execute(f"PRAGMA temp_store={store}").close()


def write_lock(engine: Engine) -> contextlib.AbstractContextManager[Any]:
    """The write lock for an engine's SQLite file (one per file per process); a no-op for
    PostgreSQL, which has row locks, and for an in-memory database."""
    path = sqlite_path(engine)
    if path is None:
        return contextlib.nullcontext()
    return lock_for_file(path)


# Statements that write (or begin a transaction that will): a connection takes the file's
# write lock before the first of them. `WITH` is a write when it ends in one.
_WRITES = frozenset(
    {"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "SAVEPOINT", "VACUUM"}
)
_COMMENT = re.compile(r"\s*(?:--[^\n]*\n|/\*.*?\*/)", re.S)
_DML = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.I)


def writes(statement: str) -> bool:
    """Whether a SQL statement writes to the database (pure)."""
    text = statement.lstrip()
    while text.startswith(("--", "/*")):
        match = _COMMENT.match(text)
        if match is None:
            return False
        text = text[match.end() :].lstrip()
    head = text[:16].split(None, 1)
    word = head[0].upper() if head else ""
    if word == "WITH":
        return _DML.search(text) is not None
    if word == "BEGIN":
        return text[5:].lstrip()[:9].upper() in ("IMMEDIATE", "EXCLUSIVE")
    return word in _WRITES


class LockingCursor(sqlite3.Cursor):
    """Takes its connection's write lock before a write that needs it (see LockingConnection)."""

    connection: LockingConnection

    def execute(self, sql: str, parameters: Any = (), /) -> LockingCursor:
        self.connection.before(sql)
        try:
            super().execute(sql, parameters)
        finally:
            self.connection.after()
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> LockingCursor:
        self.connection.before(sql)
        try:
            super().executemany(sql, seq_of_parameters)
        finally:
            self.connection.after()
        return self


class LockingConnection(sqlite3.Connection):
    """A SQLite connection that holds its file's `WriteLock` from its first write in a
    transaction until the transaction ends.

    The driver opens a transaction right before the first INSERT/UPDATE/DELETE (reads before
    it run outside any transaction), so the lock is taken exactly when SQLite's own write
    lock is about to be, and the BEGIN that follows never meets another writer of this file
    that plays by the same rule: nobody waits in SQLite's sleeping busy handler. A statement
    that writes outside a transaction (DDL) holds the lock for that statement only. Readers
    take nothing. `make_engine` opens every SQLite connection of the App this way.

    Its commits checkpoint the WAL (SQLite's automatic checkpoint, holding the lock) only
    while no WalCheckpointer of this process looks after the file and no `no_checkpoints`
    holds them back; it checks each time it takes the lock.
    """

    def __init__(self, database: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        name = str(database)
        memory = name in ("", ":memory:") or name.startswith("file:")
        self._lock = None if memory else lock_for_file(Path(name))
        self._path = None if self._lock is None else Path(name).resolve()
        self._autocheckpoint = SQLITE_AUTOCHECKPOINT  # as SQLite opens a connection
        self.checkpoints_held = 0  # `no_checkpoints` blocks around this connection
        self._holding = False
        self._since = 0.0
        self._first = ""

    def cursor(self, factory: Any = LockingCursor) -> Any:
        return super().cursor(factory)

    def before(self, sql: str) -> None:
        if self._lock is not None and not self._holding and writes(sql):
            self._follow_checkpointer()
            self._lock.acquire()
            self._holding = True
            self._since, self._first = time.monotonic(), sql

    def _follow_checkpointer(self) -> None:
        """No checkpoint in this connection's commits while a checkpointer or a
        `no_checkpoints` block does them; SQLite's automatic ones otherwise."""
        assert self._path is not None
        held = self.checkpoints_held or checkpointed_here(self._path)
        wanted = 0 if held else SQLITE_AUTOCHECKPOINT
        if wanted != self._autocheckpoint:
            sqlite3.Cursor(self).execute(f"PRAGMA wal_autocheckpoint={wanted}").close()
            self._autocheckpoint = wanted

    def after(self) -> None:
        """Outside a transaction (a DDL statement done, or a BEGIN that failed) let go."""
        if self._holding and not self.in_transaction:
            self._let_go()

    def _let_go(self) -> None:
        self._holding = False
        if self._lock is not None:
            self._lock.release()
        note_hold(time.monotonic() - self._since, self._first)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            if self._holding and not self.in_transaction:
                self._let_go()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            if self._holding and not self.in_transaction:
                self._let_go()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._holding:
                self._let_go()


@contextlib.contextmanager
def no_checkpoints(dbapi_connection: Any) -> Iterator[None]:
    """Within the block, the commits of this SQLite connection never checkpoint (its user
    checkpoints when it suits it); anything but a `LockingConnection` is left as it is."""
    if not isinstance(dbapi_connection, LockingConnection):
        yield
        return
    dbapi_connection.checkpoints_held += 1
    try:
        yield
    finally:
        dbapi_connection.checkpoints_held -= 1
