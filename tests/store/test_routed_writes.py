"""Every SQLite write of the App queues on the one write lock: handlers write while webhooks
are acknowledged, in threads and in another process, and nobody ever needs SQLite's busy
handler. Real SQLite, real threads, a real second process."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.config.operator_config import OperatorConfig
from app.config.process_settings import load_settings
from app.github.client import GitHubApp
from app.github.ingest import IngestWriter
from app.github.router import Router
from app.github.services import HandlerContext, Services
from app.github.worker import InboxWorker
from app.store import Sessions
from app.store.engines import make_engine, migrate
from app.store.sqlite_writes import WriteLockTimeout, lock_for_file, writes
from app.store.tables import Delivery, Event, InboxState, Once

ROOT = Path(__file__).resolve().parents[2]
CLIENTS, PER_CLIENT, OTHER_PROCESS_WRITES = 4, 120, 150

# Another process of the App writing to the same file the whole time.
OTHER_WRITER = """
import sys
from sqlalchemy import event, insert
from app.store.engines import make_engine
from app.store.tables import Once
engine = make_engine(sys.argv[1])
event.listen(engine, "connect", lambda conn, _rec: conn.execute("PRAGMA busy_timeout=0"))
for n in range(int(sys.argv[2])):
    with engine.begin() as conn:
        conn.execute(insert(Once).values(key=f"other:{n}"))
"""


def no_busy_wait(dbapi_connection: Any, _record: Any) -> None:
    """Runs after the App's own pragmas: any writer meeting another now fails at once with
    "database is locked" instead of sleeping in the busy handler."""
    dbapi_connection.execute("PRAGMA busy_timeout=0")


def writing_handler(ctx: HandlerContext) -> None:
    """A handler that reads, then writes, then writes inside a savepoint and records an event."""
    ctx.session.scalar(select(func.count()).select_from(Once))
    ctx.session.add(Once(key=f"effect:{ctx.delivery_id}"))
    ctx.session.flush()
    with ctx.session.begin_nested():
        ctx.session.add(Once(key=f"nested:{ctx.delivery_id}"))
    ctx.services.events.emit("test.handled", session=ctx.session, delivery=ctx.delivery_id)


def test_handlers_write_while_webhooks_are_acknowledged_and_no_writer_ever_waits_on_sqlite(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'the-loop.db'}"
    engine = make_engine(url)
    event.listen(engine, "connect", no_busy_wait)
    migrate(engine)
    settings = load_settings({"THE_LOOP_STATE_DIR": str(tmp_path)}, dotenv=None)
    services = Services(
        settings=settings,
        config=OperatorConfig(),
        events=EventLog(tmp_path / "events.jsonl", engine),
        github=GitHubApp(settings),
    )
    router = Router({("issue_comment", "created"): [writing_handler]})
    writer = IngestWriter(engine, EventLog(None), router.routes)
    workers = [InboxWorker(services, Sessions(engine), router, name=f"w{n}") for n in range(3)]
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_WRITER, url, str(OTHER_PROCESS_WRITES)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
    acked: list[bool] = []
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            for i in range(PER_CLIENT):
                body = b'{"action":"created","n":"%d-%d"}' % (n, i)
                acked.append(writer.store(f"d-{n}-{i}", "issue_comment", "created", body))
                for worker in workers:
                    worker.wake.set()
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors.append(exc)

    for worker in workers:
        worker.start()
    clients = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    try:
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(60)
        _out, err = other.communicate(timeout=60)
        assert other.returncode == 0, err.decode()[-2000:]
        assert not errors, errors
        assert acked == [True] * (CLIENTS * PER_CLIENT)

        def all_done() -> bool:
            with Session(engine) as session:
                waiting = select(func.count()).where(Delivery.state != InboxState.DONE)
                return session.scalar(waiting) == 0

        from tests.support import wait_for

        wait_for(all_done, timeout=60)
    finally:
        for worker in workers:
            worker.stop()
        writer.close()
    with Session(engine) as session:
        attempts = session.scalars(select(Delivery.attempts)).all()
        keys = session.scalars(select(Once.key)).all()
        handled = session.scalar(
            select(func.count()).select_from(Event).where(Event.event == "test.handled")
        )
    engine.dispose()
    total = CLIENTS * PER_CLIENT
    assert len(attempts) == total and set(attempts) == {1}  # no handler ever failed and retried
    assert sum(k.startswith("effect:") for k in keys) == total
    assert sum(k.startswith("nested:") for k in keys) == total
    assert sum(k.startswith("other:") for k in keys) == OTHER_PROCESS_WRITES
    assert handled == total


def test_a_thread_writing_through_a_second_connection_is_refused_at_once(tmp_path: Path) -> None:
    """Its first connection holds the lock until it commits: waiting would be waiting on
    itself, so the second write fails at once instead of hanging."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    try:
        with engine.connect() as first, engine.connect() as second:
            first.execute(Once.__table__.insert().values(key="a"))
            with pytest.raises(Exception, match="already holds the write lock"):
                second.execute(Once.__table__.insert().values(key="b"))
            first.commit()
            second.rollback()
            second.execute(Once.__table__.insert().values(key="b"))
            second.commit()
    finally:
        engine.dispose()


def test_a_writer_waiting_on_another_thread_gives_up_after_the_timeout(tmp_path: Path) -> None:
    lock = lock_for_file(tmp_path / "the-loop.db")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(WriteLockTimeout, match=r"busy for 0\.2 s"):
            lock.acquire(timeout=0.2)
    finally:
        release.set()
        thread.join(10)
    with lock:  # free again
        pass


@pytest.mark.parametrize(
    ("statement", "takes_the_lock"),
    [
        ("SELECT * FROM inbox", False),
        ("PRAGMA wal_checkpoint(PASSIVE)", False),
        ("BEGIN", False),
        ("  insert into once (key) values (?)", True),
        ("-- a comment\nUPDATE inbox SET state = ?", True),
        ("/* a comment */ DELETE FROM events", True),
        ("WITH old AS (SELECT id FROM events) DELETE FROM events WHERE id IN old", True),
        ("WITH n AS (SELECT 1) SELECT * FROM n", False),
        ("SAVEPOINT sa_savepoint_1", True),
        ("BEGIN IMMEDIATE", True),
        ("CREATE TABLE t (id INTEGER)", True),
    ],
)
def test_which_statements_take_the_write_lock(statement: str, takes_the_lock: bool) -> None:
    assert writes(statement) is takes_the_lock
