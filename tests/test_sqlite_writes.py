"""SQLite writers in several processes queue on one lock, and the WAL stays bounded while
writers never pause. Real processes, real files."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from app.store import make_engine
from app.store.sqlite_writes import WalCheckpointer, WriteLock, write_lock

ROOT = Path(__file__).resolve().parents[1]

HOLDER = """
import sys, time
from pathlib import Path
from app.store.sqlite_writes import WriteLock
lock = WriteLock(Path(sys.argv[1]))
for _ in range(3):
    with lock:
        start = time.time()
        time.sleep(0.05)
        with open(sys.argv[2], "a") as log:
            log.write(f"{start} {time.time()}\\n")
"""


def test_processes_holding_the_write_lock_never_overlap(tmp_path):
    db, log = tmp_path / "the-loop.db", tmp_path / "held.log"
    procs = [
        subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(log)], cwd=ROOT)
        for _ in range(3)
    ]
    for proc in procs:
        assert proc.wait(timeout=30) == 0
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 9
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, spans


def _hold_in_child(lock: WriteLock, held: multiprocessing.synchronize.Event) -> None:
    with lock:
        held.set()
        time.sleep(0.5)


def test_a_forked_child_takes_the_lock_for_itself(tmp_path):
    """gunicorn forks its workers from a process that may already have used the lock: a child
    must not share its parent's open lock file, or both would hold the lock at once."""
    lock = WriteLock(tmp_path / "the-loop.db")
    with lock:
        pass  # the parent has the lock file open now
    context = multiprocessing.get_context("fork")
    held = context.Event()
    child = context.Process(target=_hold_in_child, args=(lock, held))
    child.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with lock:
            waited = time.monotonic() - started
        assert waited > 0.2
    finally:
        child.join(10)
    assert child.exitcode == 0


def test_write_lock_is_one_per_file_and_nothing_for_postgresql(tmp_path):
    first = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    again = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    other = make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert write_lock(first) is write_lock(again)
        assert write_lock(first) is not write_lock(other)
        assert not isinstance(write_lock(make_engine("sqlite://")), WriteLock)
        postgres = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
        assert not isinstance(write_lock(postgres), WriteLock)
    finally:
        for engine in (first, again, other):
            engine.dispose()


def _wal_frames(path: Path) -> int:
    size = path.with_name(path.name + "-wal").stat().st_size
    return max(0, (size - 32) // (4096 + 24))


def _write_without_pause(db: Path, lock: WriteLock, stop: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    blob = os.urandom(3000)
    while not stop.is_set():
        with lock:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO t (b) VALUES (?)", [(blob,)] * 100)
            conn.execute("COMMIT")
    conn.close()


def test_the_checkpointer_bounds_the_wal_while_writers_never_pause(tmp_path):
    db = tmp_path / "the-loop.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
    conn.close()
    engine = make_engine(f"sqlite:///{db}")
    checkpointer = WalCheckpointer(engine, interval=0.02, restart_at_frames=500).start()
    stop = threading.Event()
    # Two writers taking turns: there is always a commit in flight, so no PASSIVE round ever
    # finds the WAL fully copied (without the bound, the WAL ends up larger than the data).
    writers = [
        threading.Thread(target=_write_without_pause, args=(db, write_lock(engine), stop))
        for _ in range(2)
    ]
    for writer in writers:
        writer.start()
    try:
        time.sleep(2.0)
        wal_frames = _wal_frames(db)  # while open: closing the last connection removes it
    finally:
        stop.set()
        for writer in writers:
            writer.join(10)
        checkpointer.stop()
        engine.dispose()
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM t").fetchone()[0]
    written_frames = rows * 3000 // 4096
    assert written_frames > 5_000  # ten times the bound went through the WAL
    # The WAL file (its size is its high-water mark) stayed a fraction of what went through.
    assert wal_frames < written_frames // 3, (wal_frames, written_frames)
    # …and everything committed is in the database file after a final checkpoint.
    check = sqlite3.connect(db)
    check.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert check.execute("SELECT count(*) FROM t").fetchone()[0] == rows
