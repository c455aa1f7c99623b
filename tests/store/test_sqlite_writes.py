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

from app.store.engines import make_engine, migrate
from app.store.inbox import read_keys_ahead
from app.store.sqlite_writes import (
    SLOW_HOLD,
    WriteLock,
    checkpointed_here,
    no_checkpoints,
    note_hold,
    write_lock,
)
from app.store.wal_checkpoints import WalCheckpointer, look_after

ROOT = Path(__file__).resolve().parents[2]

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


def _wal_database(tmp_path: Path, rows: int) -> tuple[Path, sqlite3.Connection]:
    """A WAL database whose log holds `rows` uncheckpointed 3 KB rows (about 3/4 frame each)."""
    db = tmp_path / "the-loop.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
    _write(writer, rows)
    return db, writer


def _write(conn: sqlite3.Connection, rows: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO t (b) VALUES (?)", [(os.urandom(3000),)] * rows)
    conn.execute("COMMIT")


def _frames_in_log(conn: sqlite3.Connection) -> int:
    """How many frames the WAL holds since it was last restarted (a PASSIVE round reports it)."""
    return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def _checkpoint_in_thread(checkpointer: WalCheckpointer, conn: sqlite3.Connection):
    done = threading.Event()
    frames: list[int] = []

    def run() -> None:
        frames.append(checkpointer.checkpoint(conn))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, frames


def test_past_the_bound_a_round_waits_for_writers_and_the_wal_starts_over(tmp_path):
    """Past `restart_at_frames` a round takes the write lock, so nothing is appended while it
    copies: everything is copied and the next commit starts the log from the beginning.
    (How large the WAL file grows under a flood is a speed figure: `bench/ingest.py` prints it.)"""
    db, writer = _wal_database(tmp_path, rows=300)
    engine = make_engine(f"sqlite:///{db}")
    checkpointer = WalCheckpointer(engine, restart_at_frames=100)
    conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
    lock = write_lock(engine)
    try:
        with lock:  # a writer holds the lock: the round must wait for it
            done, frames = _checkpoint_in_thread(checkpointer, conn)
            assert not done.wait(0.3)
        assert done.wait(10)
        assert frames[0] >= 100
        _write(writer, 1)
        assert _frames_in_log(conn) < 10  # the log started over: the bound holds
        assert sqlite3.connect(db).execute("SELECT count(*) FROM t").fetchone()[0] == 301
    finally:
        conn.close()
        writer.close()
        engine.dispose()


def test_past_the_bound_the_copied_pages_reach_the_disk_before_writers_are_held(tmp_path):
    """SQLite syncs the database file only in a pass that copies everything, which writers
    that never pause do not allow: left to the locked pass, that sync held every writer for
    the whole cycle's pages. The round flushes the file while a writer still holds the lock,
    and the pass that waits for the lock still finishes the copy."""
    db, writer = _wal_database(tmp_path, rows=300)
    engine = make_engine(f"sqlite:///{db}")
    flushed: list[int] = []

    def flush(descriptor: int) -> None:
        os.fdatasync(descriptor)
        flushed.append(os.fstat(descriptor).st_ino)  # which file

    checkpointer = WalCheckpointer(engine, restart_at_frames=100, flush=flush)
    conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        with write_lock(engine):
            done, _frames = _checkpoint_in_thread(checkpointer, conn)
            assert not done.wait(0.3)  # the last pass waits for the writer
            # ...having flushed the database file twice meanwhile, the writer still writing
            assert flushed == [db.stat().st_ino] * 2
        assert done.wait(10)
        _write(writer, 1)
        assert _frames_in_log(conn) < 10  # the log started over
        assert sqlite3.connect(db).execute("SELECT count(*) FROM t").fetchone()[0] == 301
    finally:
        conn.close()
        writer.close()
        engine.dispose()


def test_a_flush_that_fails_leaves_the_locked_pass_to_sync_and_the_wal_still_starts_over(
    tmp_path, caplog
):
    db, writer = _wal_database(tmp_path, rows=300)
    engine = make_engine(f"sqlite:///{db}")

    def flush(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    checkpointer = WalCheckpointer(engine, restart_at_frames=100, flush=flush)
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        assert checkpointer.checkpoint(conn) >= 100
        _write(writer, 1)
        assert _frames_in_log(conn) < 10
        assert "could not flush" in caplog.text and "Input/output error" in caplog.text
    finally:
        conn.close()
        writer.close()
        engine.dispose()


def test_under_the_bound_a_round_never_waits_for_writers(tmp_path):
    db, writer = _wal_database(tmp_path, rows=20)
    engine = make_engine(f"sqlite:///{db}")
    checkpointer = WalCheckpointer(engine, restart_at_frames=1000)
    conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        with write_lock(engine):
            done, frames = _checkpoint_in_thread(checkpointer, conn)
            assert done.wait(10)  # finished while the lock was held by a writer
        assert 0 < frames[0] < 1000
    finally:
        conn.close()
        writer.close()
        engine.dispose()


def test_keys_are_read_ahead_while_another_writer_holds_the_lock(tmp_path):
    """The read before a prune's DELETE takes no lock: it runs to its end while another
    writer holds the file's write lock (a write would wait for that writer)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    held, done = threading.Event(), threading.Event()

    def writer() -> None:
        with write_lock(engine):
            held.set()
            done.wait(30)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert held.wait(10)
        with engine.connect() as conn, conn.begin():
            read_keys_ahead(conn, ["delivery-1", "delivery-2"], ["ab" * 32])
            assert thread.is_alive() and not done.is_set()  # the writer still holds the lock
    finally:
        done.set()
        thread.join(10)
        engine.dispose()


def _store_rows(conn, rows: int) -> None:
    """Commit `rows` 3 KB rows (about a WAL frame each) on an App connection."""
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, b BLOB)")
    conn.exec_driver_sql("INSERT INTO t (b) VALUES (?)", [(os.urandom(3000),)] * rows)
    conn.commit()


def _copied_into_the_file(db: Path) -> bool:
    """Whether the rows reached the database file itself, which only a checkpoint does
    (committed pages stay in the WAL until one copies them)."""
    return db.stat().st_size > 2_000_000


def test_while_a_checkpointer_runs_the_commits_of_its_process_never_checkpoint(tmp_path):
    """A commit past SQLite's 1,000-page threshold checkpoints the whole WAL holding the write
    lock (every webhook waits); while a WalCheckpointer of the process looks after the file,
    a handler's commit leaves that to it, and once it stops, commits checkpoint again."""
    db = tmp_path / "the-loop.db"
    engine = make_engine(f"sqlite:///{db}")
    checkpointer = WalCheckpointer(engine, interval=3600).start()  # no round during the test
    try:
        assert checkpointed_here(db.resolve())
        with engine.connect() as conn:
            _store_rows(conn, 1500)
        assert not _copied_into_the_file(db)
        assert (tmp_path / "the-loop.db-wal").stat().st_size > 4_000_000  # all in the WAL
    finally:
        checkpointer.stop()
    try:
        assert not checkpointed_here(db.resolve())
        with engine.connect() as conn:  # the same pooled connection: it follows the change
            _store_rows(conn, 1)
        assert _copied_into_the_file(db)
    finally:
        engine.dispose()


def test_a_prune_holds_back_its_own_connections_checkpoints(tmp_path):
    db = tmp_path / "the-loop.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            with no_checkpoints(conn.connection.dbapi_connection):
                _store_rows(conn, 1500)
                assert not _copied_into_the_file(db)
            _store_rows(conn, 1)
            assert _copied_into_the_file(db)
    finally:
        engine.dispose()


def _checkpointer_threads() -> int:
    return sum(thread.name == "wal-checkpointer" for thread in threading.enumerate())


def test_the_users_of_a_file_share_one_checkpointer_until_the_last_lets_go(tmp_path):
    db = tmp_path / "the-loop.db"
    engine = make_engine(f"sqlite:///{db}")
    before = _checkpointer_threads()
    try:
        writer_done, workers_done = look_after(engine), look_after(engine)
        assert _checkpointer_threads() == before + 1 and checkpointed_here(db.resolve())
        writer_done()
        writer_done()  # a second release of the same user changes nothing
        assert _checkpointer_threads() == before + 1 and checkpointed_here(db.resolve())
        workers_done()
        assert _checkpointer_threads() == before and not checkpointed_here(db.resolve())
        look_after(make_engine("sqlite://"))()  # in memory: nothing to look after
    finally:
        engine.dispose()


def test_a_hold_past_the_slow_bound_is_logged_with_its_holder_as_the_benches_count_it(caplog):
    """Transactions and the checkpointer's locked pass report a long hold the same way, so
    `bench/retention.py` counts both (it looks for "SQLite write lock held")."""
    note_hold(SLOW_HOLD / 2, "UPDATE inbox SET state=?")
    assert "SQLite write lock held" not in caplog.text
    note_hold(SLOW_HOLD + 0.05, "the WAL checkpointer's last pass, past 131072 frames")
    assert "SQLite write lock held 300 ms from: the WAL checkpointer's last pass" in caplog.text
