"""Keeping SQLite writes off each other's toes when several App processes share one file.

Two things measured with `bench/ingest` made acknowledgements slow on SQLite, and both are
about the hot path waiting on something it should not wait for:

- **Writers polling for the lock.** SQLite's busy handler sleeps 1, 2, 5, 10… ms between
  attempts, and a group-committing writer in one gunicorn worker can starve its twin in
  another for hundreds of milliseconds. `WriteLock` queues writers on a blocking `flock`
  instead, so the next writer starts the moment the last one commits.
- **Checkpoints inside a commit.** With automatic checkpoints, the commit that crosses the
  threshold copies the whole WAL into the database file and syncs it before returning.
  `WalCheckpointer` does that work on its own thread (PASSIVE: writers carry on). Once a
  pass has copied every frame, the next commit starts the WAL over from the top, which under
  real traffic happens in any pause of a tenth of a second. Writers that never pause keep
  a pass from ever reaching the end, so past a hard bound the checkpointer copies the last
  frames again holding the write lock: that pass must sync the file while writers wait
  (25 to 60 ms measured under load), hence a bound that a burst does not reach.
  (TRUNCATE would do the same and also shrink the file under the lock: 250 ms measured.)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 0.1
# Past this many frames (512 MiB at 4 KiB pages; ~35 s of the most `bench/ingest` can
# send) the checkpointer holds writers back to finish a pass, so the WAL starts over.
RESTART_AT_FRAMES = 131_072


def sqlite_path(engine: Engine) -> Path | None:
    """The database file behind a SQLite engine; None for PostgreSQL or an in-memory db."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    return Path(database)


class WriteLock:
    """One writer at a time across the threads and processes that use the same SQLite file.

    A thread lock orders this process's threads; `flock` on `<db>-writelock` orders
    processes (flock is held per open file, so threads of one process would share it).
    The file is reopened after a fork so a child never shares its parent's lock.
    """

    def __init__(self, db_path: Path) -> None:
        self.path = db_path.with_name(db_path.name + "-writelock")
        self._thread_lock = threading.Lock()
        self._fd = -1
        self._pid = -1

    def _file(self) -> int:
        if self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd

    def __enter__(self) -> WriteLock:
        self._thread_lock.acquire()
        try:
            fcntl.flock(self._file(), fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()


_locks: dict[Path, WriteLock] = {}
_locks_guard = threading.Lock()


def write_lock(engine: Engine) -> contextlib.AbstractContextManager[Any]:
    """The write lock for an engine's SQLite file (one per file per process); a no-op for
    PostgreSQL, which has row locks, and for an in-memory database."""
    path = sqlite_path(engine)
    if path is None:
        return contextlib.nullcontext()
    key = path.resolve()
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = WriteLock(key)
        return lock


class WalCheckpointer:
    """Copies committed WAL pages into the database file in the background, for a
    connection that turned automatic checkpoints off (`PRAGMA wal_autocheckpoint=0`)."""

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
        self.lock = write_lock(engine)
        self.interval = interval
        self.restart_at_frames = restart_at_frames
        self._last_frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> WalCheckpointer:
        self._thread = threading.Thread(target=self._run, name="wal-checkpointer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

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
