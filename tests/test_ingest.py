"""Group-commit intake: every waiter learns whether its delivery was new, duplicates included."""

from __future__ import annotations

import threading

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.events import EventLog, read_jsonl
from app.github.ingest import IngestUnavailable, IngestWriter
from app.store import make_engine, migrate
from app.store.models import Delivery, Event


def test_concurrent_stores_with_repeats_keep_one_row_per_delivery(database_url, tmp_path):
    engine = make_engine(database_url)
    migrate(engine)
    writer = IngestWriter(engine, EventLog(tmp_path / "events.jsonl", engine))
    answers: dict[str, list[bool]] = {}
    lock = threading.Lock()

    def send(thread: int) -> None:
        for n in range(30):
            delivery = f"d-{n % 20}"  # every thread repeats the same 20 ids
            new = writer.store(delivery, "issues", "opened", b'{"action":"opened"}')
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
