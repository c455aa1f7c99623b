"""Retention: exactly what is past its age goes, in small batches; the young stay; a parked
delivery is never pruned. On SQLite and PostgreSQL, through the function, the command and
the App's own worker."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, insert, select
from sqlalchemy.orm import Session

from app.github.services import utcnow
from app.store.engines import make_engine, migrate
from app.store.retention import Pruned, Retention, prune
from app.store.tables import Delivery, Event, InboxState, Once
from tests.support import wait_for, wsgi_app

ROOT = Path(__file__).resolve().parents[2]
BODY = b'{"action":"created","comment":{"body":"hello"}}'


def delivery(name: str, state: str, age: timedelta, now: datetime) -> dict[str, Any]:
    at = now - age
    return {
        "delivery_id": name,
        "event": "issue_comment",
        "action": "created",
        "body": BODY,
        "body_sha256": name.ljust(64, "0"),
        "state": state,
        "attempts": 1,
        "next_attempt_at": at,
        "received_at": at,
        "done_at": at if state == InboxState.DONE else None,
        "last_error": "boom" if state == InboxState.PARKED else None,
    }


def fill(engine: Any, now: datetime) -> None:
    """Rows of every kind at ages either side of the defaults (7, 8, 90, 30 days)."""
    day = timedelta(days=1)
    rows = [delivery(f"done-old-{n}", InboxState.DONE, 9 * day + n * day, now) for n in range(5)]
    rows += [
        delivery("done-body-old", InboxState.DONE, 7.5 * day, now),
        delivery("done-young", InboxState.DONE, 2 * day, now),
        delivery("parked-ancient", InboxState.PARKED, 400 * day, now),
        delivery("queued-old", InboxState.QUEUED, 20 * day, now),
    ]
    with engine.begin() as conn:
        conn.execute(insert(Delivery), rows)
        conn.execute(
            insert(Event),
            [
                {"ts": now - age * day, "event": f"e.{age}", "work_item_id": None, "data": {}}
                for age in (91, 95, 200, 89, 1)
            ],
        )
        conn.execute(
            insert(Once),
            [
                {"key": "spawner-event:1:old-a", "created_at": now - 31 * day},
                {"key": "spawner-event:1:old-b", "created_at": now - 60 * day},
                {"key": "spawner-event:1:young", "created_at": now - 29 * day},
                {"key": "reply:github:acme/web#1", "created_at": now - 400 * day},
            ],
        )


def what_is_left(engine: Any) -> dict[str, Any]:
    with Session(engine) as session:
        bodies = dict(session.execute(select(Delivery.delivery_id, Delivery.body)).all())
        events = sorted(session.scalars(select(Event.event).where(Event.event.like("e.%"))))
        keys = sorted(session.scalars(select(Once.key)))
    return {"bodies": bodies, "events": events, "keys": keys}


def assert_pruned(left: dict[str, Any]) -> None:
    assert left["bodies"] == {
        "done-body-old": b"",  # row kept for dedupe, body gone
        "done-young": BODY,
        "parked-ancient": BODY,  # waits for an operator, whatever its age
        "queued-old": BODY,
    }
    assert left["events"] == ["e.1", "e.89"]
    assert left["keys"] == ["reply:github:acme/web#1", "spawner-event:1:young"]


def test_exactly_the_old_rows_go_in_small_batches(database_url: str) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    now = utcnow()
    fill(engine, now)
    try:
        pruned = prune(engine, Retention(), now, batch=2, pause=0)
        assert pruned == Pruned(bodies=1, deliveries=5, events=3, spawner_event_ids=2)
        assert_pruned(what_is_left(engine))
        assert prune(engine, Retention(), now, batch=2, pause=0).total() == 0  # nothing twice
    finally:
        engine.dispose()


def test_a_prune_finds_and_changes_deliveries_by_primary_key(tmp_path: Path) -> None:
    """A statement naming the state let SQLite pick the (state, turn, id) claim index and
    read every done row for each batch of 200: a prune of a 1,000,000-delivery store ran for
    over 20 minutes. Every statement a prune runs on the inbox must use the primary key, but
    the read ahead of a DELETE, which looks its rows' dedupe keys up in their own indexes."""
    engine = make_engine(f"sqlite:///{tmp_path / 'the-loop.db'}")
    migrate(engine)
    now = utcnow()
    fill(engine, now)
    old = [delivery(f"bulk-{n:03d}-", InboxState.DONE, timedelta(days=10), now) for n in range(400)]
    with engine.begin() as conn:
        conn.execute(insert(Delivery), old)
    statements: list[str] = []

    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    engine.dispose()
    event.listen(engine, "connect", trace)
    try:
        assert prune(engine, Retention(), now, pause=0).deliveries == 405
        on_inbox = {sql for sql in statements if " inbox " in f"{sql} " and "PRAGMA" not in sql}
        with engine.connect() as conn:
            plans = {
                sql: " | ".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
                for sql in on_inbox
            }
    finally:
        engine.dispose()
    assert any(sql.startswith("DELETE") for sql in plans) and len(plans) >= 4
    ahead = {sql for sql in plans if sql.startswith("SELECT count(*)")}
    assert ahead  # one a batch that deletes
    for sql, plan in plans.items():
        assert "ix_inbox_state_turn" not in plan, (sql, plan)
        if sql in ahead:
            assert "(delivery_id=?)" in plan and "(body_sha256=?)" in plan, plan
        else:
            assert "INTEGER PRIMARY KEY" in plan, (sql, plan)


def test_inbox_prune_says_what_it_removed(database_url: str, tmp_path: Path) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    fill(engine, utcnow())
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
        "THE_LOOP_RETAIN_EVENTS_DAYS": "60",  # the 89-day event goes too
        "PYTHONPATH": str(ROOT),
    }
    try:
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "inbox", "--prune"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        lines = {" ".join(line.split()[:-3]): line.split()[-3] for line in out.splitlines()[1:]}
        assert lines == {
            "done deliveries' bodies": "1",
            "done deliveries (dedupe keys)": "5",
            "events": "4",
            "spawner event ids": "2",
        }, out
        assert what_is_left(engine)["events"] == ["e.1"]
    finally:
        engine.dispose()


def test_the_apps_worker_prunes_on_its_own(settings_env: dict[str, str]) -> None:
    with wsgi_app({**settings_env, "THE_LOOP_PRUNE_INTERVAL": "0.2"}) as app:
        fill(app.state.engine, utcnow())
        wait_for(lambda: app.events("store.pruned"), timeout=20)
        assert_pruned(what_is_left(app.state.engine))
        (reported,) = app.events("store.pruned")
        assert reported["deliveries"] == 5
