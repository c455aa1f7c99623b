"""Keeping SQLite writes off each other's toes when several App processes share one file.

Two things measured with `bench/ingest` made acknowledgements slow on SQLite, and both are
about the hot path waiting on something it should not wait for:

- **Writers polling for the lock.** SQLite's busy handler sleeps 1, 2, 5, 10… ms between
  attempts, and a group-committing writer in one gunicorn worker can starve its twin in
  another for hundreds of milliseconds; a handler's transaction in the same process did the
  same to the ingest writer. `WriteLock` queues writers on a thread lock and a blocking
  `flock` instead, so the next writer starts the moment the last one commits, and every
  SQLite connection the App opens (`LockingConnection`) takes it at its first write: the
  ingest writer, handlers, claims, the API, commands, migrations.
- **Checkpoints inside a commit.** With automatic checkpoints, the commit that crosses the
  threshold copies the whole WAL into the database file and syncs it before returning,
  holding the write lock all along: under a flood every handler's commit did (25 ms a
  claim), and every webhook waited. `WalCheckpointer` does that work on its own thread
  (PASSIVE: writers carry on), and while one runs in a process no connection of that
  process checkpoints in a commit (`LockingConnection`). Once a pass has copied every
  frame, the next commit starts the WAL over from the top, which under real traffic
  happens in any pause of a tenth of a second. Writers that never pause (a flood, or even a
  steady 200 deliveries a second) keep a pass from ever reaching the end, so past a hard
  bound the checkpointer copies the last frames again holding the write lock: that pass
  must sync the file while writers wait (7 to 200 ms measured under a flood, however few
  frames are left: the sync waits for the disk), hence a bound that a burst does not reach.
  (TRUNCATE would do the same and also shrink the file under the lock: 250 ms measured.)
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 0.1
# Past this many frames (512 MiB at 4 KiB pages; ~35 s of the most `bench/ingest` can
# send) the checkpointer holds writers back to finish a pass, so the WAL starts over.
RESTART_AT_FRAMES = 131_072
# How long a writer waits for the other threads of its process (SQLite's busy timeout too).
LOCK_TIMEOUT = 30.0
# A transaction holding the lock longer than this (seconds) is logged: every webhook waited.
SLOW_HOLD = 0.25
# SQLite's default: WAL pages after which a commit checkpoints, where no checkpointer runs.
SQLITE_AUTOCHECKPOINT = 1000


def sqlite_path(engine: Engine) -> Path | None:
    """The database file behind a SQLite engine; None for PostgreSQL or an in-memory db."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    return Path(database)


class WriteLockTimeout(sqlite3.OperationalError):
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
_shared: dict[Path, tuple[WalCheckpointer, int]] = {}  # `look_after`'s checkpointers, users
_checkpointers_guard = threading.RLock()  # look_after starts a checkpointer holding it


def checkpointed_here(path: Path) -> bool:
    """Whether a WalCheckpointer of this process copies the WAL of the file at `path` (a
    resolved path: every connection asks at each write, so it is not resolved again)."""
    return _checkpointed.get(path, 0) > 0


def look_after(engine: Engine) -> Callable[[], None]:
    """Have this process's one WalCheckpointer copy the WAL of the engine's SQLite file,
    starting it if none runs; returns the call that says this user no longer needs it (the
    last one stops it). Nothing to do for PostgreSQL or an in-memory database."""
    path = sqlite_path(engine)
    if path is None:
        return lambda: None
    key = path.resolve()
    with _checkpointers_guard:
        running, users = _shared.get(key) or (WalCheckpointer(engine).start(), 0)
        _shared[key] = (running, users + 1)
    released = threading.Event()

    def release() -> None:
        if released.is_set():
            return
        released.set()
        with _checkpointers_guard:
            checkpointer, left = _shared[key]
            if left > 1:
                _shared[key] = (checkpointer, left - 1)
                return
            del _shared[key]
        checkpointer.stop()

    return release


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
        held = time.monotonic() - self._since
        if held > SLOW_HOLD:  # every other writer, webhooks included, waited this long
            log.warning("SQLite write lock held %.0f ms from: %.120s", held * 1000, self._first)

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


class WalCheckpointer:
    """Copies committed WAL pages into the database file in the background. While it runs,
    the commits of this process's `LockingConnection`s on the file never checkpoint."""

    def __init__(
        self,
        engine: Engine,
        *,
        interval: float = CHECKPOINT_INTERVAL,
        restart_at_frames: int = RESTART_AT_FRAMES,
    ) -> None:
        path = sqlite_path(engine)
        if path is None:
            raise ValueError("WAL checkpoints are for a SQLite database file")
        self.path = path
        self._key = path.resolve()
        self.lock = write_lock(engine)
        self.interval = interval
        self.restart_at_frames = restart_at_frames
        self._last_frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> WalCheckpointer:
        """Start the rounds; meanwhile no commit of this process checkpoints this file."""
        with _checkpointers_guard:
            _checkpointed[self._key] = _checkpointed.get(self._key, 0) + 1
        self._thread = threading.Thread(target=self._run, name="wal-checkpointer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=5)
        with _checkpointers_guard:
            left = _checkpointed.pop(self._key, 0) - 1
            if left > 0:
                _checkpointed[self._key] = left

    def checkpoint(self, conn: sqlite3.Connection) -> int:
        """One round: a PASSIVE checkpoint; if the WAL is past the bound and writers kept it
        from copying everything, a second one under the write lock, which has only the
        frames written during the first to copy. Returns the WAL's size in frames."""
        _busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        growing, self._last_frames = frames > self._last_frames, frames
        if frames >= self.restart_at_frames and growing:
            with self.lock:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames)

    def _run(self) -> None:
        # Another checkpoint in progress is not worth waiting for: the next round comes soon.
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.checkpoint(conn)
                except sqlite3.Error as exc:  # busy or locked: the next round tries again
                    log.debug("WAL checkpoint of %s deferred: %s", self.path, exc)
        finally:
            conn.close()
