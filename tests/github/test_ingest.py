"""Group-commit intake: every waiter learns whether its delivery was new, duplicates included."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select, text
from sqlalchemy.orm import Session

from app.audit import EventLog, read_jsonl
from app.github.ingest import IngestUnavailable, IngestWriter
from app.store.engines import make_engine, migrate
from app.store.sqlite_writes import write_lock
from app.store.tables import Delivery, Event, InboxState
from tests.support import fixture_bytes


def body_of(delivery: str) -> bytes:
    """A body of its own for each delivery id (a repeated body is a repeated delivery)."""
    return b'{"action":"opened","n":"%s"}' % delivery.encode()


def test_concurrent_stores_with_repeats_keep_one_row_per_delivery(database_url, tmp_path):
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(engine, EventLog(tmp_path / "events.jsonl", engine))
    answers: dict[str, list[bool]] = {}
    lock = threading.Lock()

    def send(thread: int) -> None:
        for n in range(30):
            delivery = f"d-{n % 20}"  # every thread repeats the same 20 ids
            new = writer.store(delivery, "issues", "opened", body_of(delivery))
            with lock:
                answers.setdefault(delivery, []).append(new)

    threads = [threading.Thread(target=send, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert all(flags.count(True) == 1 for flags in answers.values()), answers
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Delivery)) == 20
            assert session.scalar(select(func.count()).select_from(Event)) == 20
        assert len(list(read_jsonl(tmp_path / "events.jsonl"))) == 20
    finally:
        engine.dispose()


def test_a_body_stored_once_is_a_repeat_under_any_other_delivery_id(database_url, tmp_path):
    """The signature covers the body only: a replay under a fresh id is no new delivery,
    whether it comes in the same batch or later."""
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(engine, EventLog(tmp_path / "events.jsonl", engine))

    async def same_batch() -> list[bool]:
        body = b'{"action":"opened","n":"together"}'
        sends = (writer.store_async(f"r-{n}", "issues", "opened", body) for n in range(5))
        return list(await asyncio.gather(*sends))

    try:
        assert writer.store("a-1", "issues", "opened", b'{"action":"opened"}')
        assert not writer.store("a-2", "issues", "opened", b'{"action":"opened"}')
        assert not writer.store("a-3", "push", None, b'{"action":"opened"}')
        assert sorted(asyncio.run(same_batch())) == [False, False, False, False, True]
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Delivery)) == 2
            assert session.scalar(select(func.count()).select_from(Event)) == 2
    finally:
        writer.close()
        engine.dispose()


def test_the_new_deliveries_of_a_batch_are_logged_in_the_order_they_arrived(database_url, tmp_path):
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(engine, EventLog(tmp_path / "events.jsonl", engine))
    ids = ["o-3", "o-1", "o-4", "o-1", "o-5", "o-9", "o-2", "o-6"]

    async def together() -> list[bool]:
        sends = [writer.store_async(d, "issues", "opened", body_of(d)) for d in ids]
        return list(await asyncio.gather(*sends))

    try:
        assert asyncio.run(together()) == [True, True, True, False, True, True, True, True]
        logged = ["o-3", "o-1", "o-4", "o-5", "o-9", "o-2", "o-6"]
        with Session(engine) as session:
            events = session.scalars(select(Event).order_by(Event.id)).all()
        assert [e.data["delivery"] for e in events] == logged
        assert [e["delivery"] for e in read_jsonl(tmp_path / "events.jsonl")] == logged
    finally:
        writer.close()
        engine.dispose()


def test_a_store_that_cannot_write_answers_unavailable(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'never-migrated.db'}")  # no tables
    writer = IngestWriter(engine, EventLog(None))
    try:
        writer.store("d-1", "issues", "opened", b"{}")
    except IngestUnavailable as exc:
        assert "inbox" in str(exc)
    else:
        raise AssertionError("a delivery was acknowledged without being stored")
    finally:
        engine.dispose()


def test_coroutines_waiting_on_the_writer_each_learn_whether_theirs_was_new(database_url):
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(engine, EventLog(None))

    async def send_all() -> list[tuple[str, bool]]:
        ids = [f"d-{n % 20}" for n in range(60)]
        news = await asyncio.gather(
            *(writer.store_async(d, "issues", "opened", body_of(d)) for d in ids)
        )
        return list(zip(ids, news, strict=True))

    try:
        answers = asyncio.run(send_all())
        for delivery in {d for d, _ in answers}:
            assert [new for d, new in answers if d == delivery].count(True) == 1
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Delivery)) == 20
    finally:
        writer.close()
        engine.dispose()


def test_a_delivery_nothing_routes_is_stored_done_and_one_that_is_routed_queued(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    writer = IngestWriter(engine, EventLog(None), routed=lambda event, _action: event == "push")
    try:
        assert writer.store("d-1", "issues", "opened", b"{}")
        assert writer.store("d-2", "push", None, b'{"ref":"main"}')
        with Session(engine) as session:
            states = dict(session.execute(select(Delivery.delivery_id, Delivery.state)).all())
            received = [e.data for e in session.scalars(select(Event).order_by(Event.id))]
        assert states == {"d-1": InboxState.DONE, "d-2": InboxState.QUEUED}
        assert [(e["delivery"], e["routed"]) for e in received] == [("d-1", False), ("d-2", True)]
    finally:
        writer.close()
        engine.dispose()


def test_a_writer_stuck_on_the_lock_answers_unavailable_and_the_redelivery_is_a_duplicate(
    tmp_path,
):
    """Someone holds the SQLite write lock too long: requests answer 503 (GitHub redelivers)
    rather than hang; the delivery is stored once the lock is free, and the redelivery is
    acknowledged as a duplicate."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    writer = IngestWriter(engine, EventLog(None), wait_seconds=0.3)
    try:
        with write_lock(engine):
            with pytest.raises(IngestUnavailable, match="in time"):
                writer.store("d-1", "issues", "opened", b"{}")
            with pytest.raises(IngestUnavailable, match="in time"):
                asyncio.run(writer.store_async("d-2", "issues", "opened", b"{}"))
        assert writer.store("d-1", "issues", "opened", b"{}") is False
        assert asyncio.run(writer.store_async("d-2", "issues", "opened", b"{}")) is False
    finally:
        writer.close()
        engine.dispose()


def test_bodies_are_stored_compressed_and_older_plain_and_zlib_rows_still_read(database_url):
    engine = make_engine(database_url)
    migrate(engine)
    body = fixture_bytes("github/issue_comment.created.json")
    writer = IngestWriter(engine, EventLog(None))
    try:
        writer.store("d-1", "issue_comment", "created", body)
        with engine.begin() as conn:
            stored = conn.execute(text("SELECT body FROM inbox")).scalar_one()
            conn.execute(
                insert(Delivery.__table__).values(
                    delivery_id="plain-1", event="issues", action=None, body=b"{}", state="done"
                )
            )
            conn.execute(
                insert(Delivery.__table__).values(
                    delivery_id="zlib-1", event="issues", action=None, body=b"{}", state="done"
                )
            )
            for delivery, raw in (
                ("plain-1", b'{"action":"opened"}'),
                ("zlib-1", zlib.compress(b'{"action":"closed"}', 1)),
            ):
                conn.execute(
                    text("UPDATE inbox SET body = :raw WHERE delivery_id = :d"),
                    {"raw": raw, "d": delivery},
                )
        assert len(bytes(stored)) * 6 < len(body)
        with Session(engine) as session:
            bodies = dict(session.execute(select(Delivery.delivery_id, Delivery.body)).all())
        assert bodies == {
            "d-1": body,
            "plain-1": b'{"action":"opened"}',
            "zlib-1": b'{"action":"closed"}',
        }
    finally:
        writer.close()
        engine.dispose()


def queued_behind_a_commit(engine: Engine, writer: IngestWriter, count: int) -> None:
    """`count` deliveries submitted at once while another commit holds the write lock: what
    the writer took before it blocked goes in one batch, the rest in the next."""
    ids = [f"{id(writer)}-{n}" for n in range(count)]
    threads = [
        threading.Thread(target=writer.store, args=(i, "issues", "opened", body_of(i))) for i in ids
    ]
    with write_lock(engine):
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5
        while writer._queue.qsize() < count - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    for thread in threads:
        thread.join(10)


def test_deliveries_queued_behind_a_commit_press_the_writer_a_few_together_do_not(tmp_path):
    """While acknowledgements wait on the writer (many deliveries arrived during a commit),
    `pressed` tells the process's handlers to step back; one delivery at a time never does,
    nor do the two or three that ordinary traffic brings together."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    calm = IngestWriter(engine, EventLog(None), pressure_hold=60)
    steady = IngestWriter(engine, EventLog(None), pressure_hold=60)
    flooded = IngestWriter(engine, EventLog(None), pressure_hold=60)
    try:
        for n in range(5):
            assert calm.store(f"calm-{n}", "issues", "opened", body_of(f"calm-{n}"))
        assert not calm.pressed()
        # three together, however they split into batches
        queued_behind_a_commit(engine, steady, 3)
        assert not steady.pressed()
        queued_behind_a_commit(engine, flooded, 10)
        assert flooded.pressed()
    finally:
        calm.close()
        steady.close()
        flooded.close()
        engine.dispose()


def test_what_the_writer_stores_reads_back_through_the_models(database_url, tmp_path):
    """The writer's driver SQL stores each field in the form the models read: times equal to
    the writer's clock, the state, the turn, the body, and the event's data as a dict."""
    from datetime import UTC, datetime

    from app.store.tables import aware, decompress_body

    moment = datetime(2026, 12, 2, 3, 4, 5, 678901, tzinfo=UTC)
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(
        engine,
        EventLog(tmp_path / "events.jsonl", engine),
        routed=lambda event, _action: event == "issue_comment",
        clock=lambda: moment,
    )
    try:
        assert writer.store("d-done", "issues", "opened", b'{"n":1}')
        assert writer.store("d-queued", "issue_comment", "created", b'{"n":2}', lane="o/r#1")
        with Session(engine) as session:
            rows = {r.delivery_id: r for r in session.scalars(select(Delivery))}
            events = list(session.scalars(select(Event).order_by(Event.id)))
            due = session.scalars(
                select(Delivery.delivery_id).where(Delivery.next_attempt_at <= moment)
            ).all()
        done, queued = rows["d-done"], rows["d-queued"]
        assert (done.state, queued.state) == (InboxState.DONE, InboxState.QUEUED)
        assert aware(done.received_at) == moment and aware(done.done_at) == moment
        assert aware(queued.next_attempt_at) == moment and queued.done_at is None
        assert sorted(due) == ["d-done", "d-queued"]  # times compare as times in SQL too
        assert done.turn == int(moment.timestamp() * 1000) <= queued.turn
        assert decompress_body(queued.body) == b'{"n":2}' and queued.attempts == 0
        assert [aware(e.ts) for e in events] == [moment, moment]
        assert [e.data for e in events] == [
            {
                "ts": moment.isoformat(),
                "event": "webhook.received",
                "work_item_id": None,
                "delivery": delivery,
                "gh_event": event,
                "action": action,
                "routed": routed,
            }
            for delivery, event, action, routed in (
                ("d-done", "issues", "opened", False),
                ("d-queued", "issue_comment", "created", True),
            )
        ]
        assert [e["delivery"] for e in read_jsonl(tmp_path / "events.jsonl")] == [
            "d-done",
            "d-queued",
        ]
    finally:
        writer.close()
        engine.dispose()


_FLOOD = """
import asyncio, sys
from app.audit import EventLog
from app.github.ingest import IngestWriter
from app.store.engines import make_engine, migrate

engine = make_engine(f"sqlite:///{sys.argv[1]}")
migrate(engine)
writer = IngestWriter(engine, EventLog(None))

async def flood():
    ids = [f"d-{n}" for n in range(3000)]
    bodies = [b'{"action":"opened","n":"%s"}' % d.encode() for d in ids]
    return await asyncio.gather(
        *(writer.store_async(d, "issues", "opened", b) for d, b in zip(ids, bodies))
    )

print(sum(asyncio.run(flood())))
writer.close()
"""


def test_a_flood_of_deliveries_writes_no_temporary_file(tmp_path):
    """Batches large enough to journal hundreds of pages keep the journal in memory: acks do
    not wait on file creation in the temporary directory, and a full one cannot fail them.
    SQLite creates and at once unlinks its temporary files, so the directory's mtime is what
    tells one was made."""
    scratch = tmp_path / "sqlite-tmp"
    scratch.mkdir()
    os.utime(scratch, (1_000_000, 1_000_000))
    env = {**os.environ, "SQLITE_TMPDIR": str(scratch), "TMPDIR": str(scratch)}
    done = subprocess.run(
        [sys.executable, "-c", _FLOOD, str(tmp_path / "the-loop.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3000"]  # every delivery stored, each new
    assert scratch.stat().st_mtime == 1_000_000, "a temporary file was created and removed"
