"""Copying the WAL into a SQLite database file off the commit path.

With SQLite's automatic checkpoints, the commit that crosses the threshold copies the whole
WAL into the database file and syncs it before returning, holding the write lock all along:
under a flood every handler's commit did, and every webhook waited.
`WalCheckpointer` does that work on its own thread (PASSIVE: writers carry on), and while
one runs in a process no connection of that process checkpoints in a commit
(`LockingConnection`). `look_after` gives a process one per file, shared by its users.

Once a pass has copied every frame, the next commit starts the WAL over from the top, which
under real traffic happens in any pause of a tenth of a second. Writers that never pause (a
flood, or even a steady 200 deliveries a second) keep a pass from ever reaching the end, so
past a hard bound the checkpointer copies the last frames again holding the write lock.

SQLite syncs the database file only in a pass that copies everything, so that locked pass
would put on disk every page the passes of the whole cycle copied, with every writer
waiting. The checkpointer flushes those pages itself first, writers carrying on, then copies
and flushes what arrived meanwhile, so the locked pass is left a few frames and little to
sync. (TRUNCATE would do the same and also shrink the file under the lock, for longer.)
`bench/ingest.py` and `bench/retention.py` print what the locked passes cost.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from app.store.sqlite_writes import count_checkpointer, note_hold, sqlite_path, write_lock

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 0.1
# Past this many frames (512 MiB at 4 KiB pages; seconds of a routed flood) the checkpointer
# holds writers back to finish a pass, so the WAL starts over.
RESTART_AT_FRAMES = 131_072

_shared: dict[Path, tuple[WalCheckpointer, int]] = {}  # `look_after`'s checkpointers, users
_shared_guard = threading.Lock()


def look_after(engine: Engine) -> Callable[[], None]:
    """Have this process's one WalCheckpointer copy the WAL of the engine's SQLite file,
    starting it if none runs; returns the call that says this user no longer needs it (the
    last one stops it). Nothing to do for PostgreSQL or an in-memory database."""
    path = sqlite_path(engine)
    if path is None:
        return lambda: None
    key = path.resolve()
    with _shared_guard:
        running, users = _shared.get(key) or (WalCheckpointer(engine).start(), 0)
        _shared[key] = (running, users + 1)
    released = threading.Event()

    def release() -> None:
        if released.is_set():
            return
        released.set()
        with _shared_guard:
            checkpointer, left = _shared[key]
            if left > 1:
                _shared[key] = (checkpointer, left - 1)
                return
            del _shared[key]
        checkpointer.stop()

    return release


_FLUSH = getattr(os, "fdatasync", os.fsync)  # a file's written pages to disk; data only
_descriptors: dict[Path, int] = {}  # `_flushing_descriptor`'s, kept for the process's life
_descriptors_guard = threading.Lock()


def _flushing_descriptor(path: Path) -> int:
    """A read-only descriptor of the database file at `path` (resolved), for flushing its
    written pages to disk. Opened once per file and never closed: closing any descriptor of
    a file drops every POSIX lock this process holds on it, SQLite's included, and another
    process could then take the file for its own (delete the WAL while this one still
    writes to it)."""
    with _descriptors_guard:
        descriptor = _descriptors.get(path)
        if descriptor is None:
            descriptor = _descriptors[path] = os.open(path, os.O_RDONLY)
        return descriptor


class WalCheckpointer:
    """Copies committed WAL pages into the database file in the background. While it runs,
    the commits of this process's `LockingConnection`s on the file never checkpoint."""

    def __init__(
        self,
        engine: Engine,
        *,
        interval: float = CHECKPOINT_INTERVAL,
        restart_at_frames: int = RESTART_AT_FRAMES,
        flush: Callable[[int], None] = _FLUSH,
    ) -> None:
        path = sqlite_path(engine)
        if path is None:
            raise ValueError("WAL checkpoints are for a SQLite database file")
        self.path = path
        self._key = path.resolve()
        self.lock = write_lock(engine)
        self.interval = interval
        self.restart_at_frames = restart_at_frames
        self.flush = flush  # how a file descriptor's written pages are put on disk
        self._last_frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> WalCheckpointer:
        """Start the rounds; meanwhile no commit of this process checkpoints this file."""
        count_checkpointer(self._key, +1)
        self._thread = threading.Thread(target=self._run, name="wal-checkpointer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=5)
        count_checkpointer(self._key, -1)

    def checkpoint(self, conn: sqlite3.Connection) -> int:
        """One round: a PASSIVE checkpoint; if the WAL is past the bound and writers kept it
        from copying everything, the copied pages flushed and a last pass under the write
        lock, which has only the frames written meanwhile to copy. Returns the WAL's size in
        frames."""
        _busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        growing, self._last_frames = frames > self._last_frames, frames
        if frames >= self.restart_at_frames and growing:
            try:
                self._settle(conn)
            except OSError as exc:  # the locked pass still runs, syncing everything itself
                log.warning("could not flush %s before the WAL's last pass: %s", self.path, exc)
            with self.lock:
                started = time.monotonic()
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                held = time.monotonic() - started
            note_hold(held, f"the WAL checkpointer's last pass, past {frames} frames")
        return int(frames)

    def _settle(self, conn: sqlite3.Connection) -> None:
        """Before writers are held: put on disk what the passes copied into the database
        file, copy what arrived meanwhile, and put that on disk too. The locked pass that
        follows then syncs a few pages, not a whole cycle's."""
        database = _flushing_descriptor(self._key)
        self.flush(database)
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self.flush(database)

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
