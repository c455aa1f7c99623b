"""What strangers can repeat costs a counter: a few rows a minute, decided by the minute alone,
so the growth of a flood is bounded by how long it lasts, not by how many requests it sends."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.audit import EventLog, read_jsonl
from app.ingress.sampling import FIELD_LIMIT, PER_MINUTE, SUMMARY, SampledLog
from app.store.engines import make_engine, migrate
from app.store.tables import Event


class Clock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def rejected(n: int) -> dict[str, str]:
    return {"reason": "bad-signature", "delivery": "d" * 8000, "gh_event": f"e{n}" * 4000}


def test_the_first_few_of_each_minute_are_rows_and_every_one_is_counted():
    clock = Clock()
    log = SampledLog(EventLog(None), clock=clock)
    written = []
    for n in range(10):
        written += log.note("bad-signature", "webhook.rejected", rejected(n))
    assert [name for name, _ in written] == ["webhook.rejected"] * PER_MINUTE
    assert all(len(fields["delivery"]) == FIELD_LIMIT for _, fields in written)
    clock.now += 60
    rolled = log.note("missing-signature", "webhook.rejected", {"reason": "missing-signature"})
    (summary_name, summary), (name, _) = rolled
    assert (summary_name, name) == (SUMMARY, "webhook.rejected")
    assert summary["counts"] == {"bad-signature": 10} and summary["sampled"] == PER_MINUTE
    assert log.totals == {"bad-signature": 10, "missing-signature": 1}


def test_the_minute_under_way_is_summed_up_at_shutdown(tmp_path: Path):
    log = SampledLog(EventLog(tmp_path / "events.jsonl"), clock=Clock())
    log.record("too-large", "webhook.rejected", {"reason": "too-large"})
    log.close()
    lines = list(read_jsonl(tmp_path / "events.jsonl"))
    assert [line["event"] for line in lines] == ["webhook.rejected", SUMMARY]
    assert lines[1]["counts"] == {"too-large": 1}
    log.close()  # nothing more to say
    assert len(list(read_jsonl(tmp_path / "events.jsonl"))) == 2


def test_a_hundred_thousand_refusals_grow_the_store_by_less_than_a_megabyte(tmp_path: Path):
    """The full count through the real counter into a real database and events.jsonl, at a
    pace far slower than any flood (100 a second, 17 minutes), with 8 KB header values."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    jsonl = tmp_path / "events.jsonl"
    clock = Clock()
    log = SampledLog(EventLog(jsonl, engine), clock=clock)
    files = (tmp_path / "the-loop.db", tmp_path / "the-loop.db-wal", jsonl)

    def size() -> int:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in files if p.exists())

    before = size()
    fields = rejected(0)
    for _ in range(100_000):
        log.record("bad-signature", "webhook.rejected", fields)
        clock.now += 0.01
    log.close()
    grown = size() - before
    with Session(engine) as session:
        rows = session.scalar(select(func.count()).select_from(Event))
    engine.dispose()
    print(f"\n100,000 refusals over 17 minutes: {rows} rows, store grew {grown:,} bytes")
    assert rows is not None and rows <= (PER_MINUTE + 1) * 18
    assert grown < 1024 * 1024
