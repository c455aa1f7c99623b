"""The delivery log's lease on SQLite and PostgreSQL: one holder at a time, the next one
only once it ran out or was let go, and only the holder records a pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.store import log_lease, make_engine, migrate
from app.store.log_lease import LogState

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=60)


def test_one_holder_at_a_time_and_only_the_holder_records_its_pass(database_url: str) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    try:
        assert log_lease.current(engine) is None
        first = log_lease.take(engine, "replica-a", NOW, TTL)
        assert first == LogState()
        assert log_lease.take(engine, "replica-b", NOW + timedelta(seconds=30), TTL) is None
        assert log_lease.renew(engine, "replica-a", NOW + timedelta(seconds=50), TTL)
        assert log_lease.take(engine, "replica-b", NOW + timedelta(seconds=70), TTL) is None
        outcome = LogState(seen_id=42, window_start=NOW, window_requests=3, last_pass={"n": 1})
        assert log_lease.finish(engine, "replica-a", outcome, NOW + timedelta(seconds=80))
        # Past the renewed lease: the other replica takes it, and starts from the outcome.
        taken = log_lease.take(engine, "replica-b", NOW + timedelta(seconds=111), TTL)
        assert taken is not None and taken.seen_id == 42 and taken.window_requests == 3
        assert not log_lease.renew(engine, "replica-a", NOW + timedelta(seconds=112), TTL)
        assert not log_lease.finish(engine, "replica-a", LogState(seen_id=1), NOW)
        log_lease.release(engine, "replica-b")
        assert log_lease.take(engine, "replica-a", NOW + timedelta(seconds=113), TTL) is not None
        current = log_lease.current(engine)
        assert current is not None and current.seen_id == 42 and current.last_pass == {"n": 1}
    finally:
        engine.dispose()
