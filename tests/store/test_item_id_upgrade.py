# rename_item_id: skip (this file names the columns and keys as they were before 0013)
"""A database from before the work item's id had one name upgrades without losing a row: the
`work_item` columns become `work_item_id`, and a job queued before the upgrade is still
served (its payload names the item by the new key)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from app.protocol import parse_payload
from app.store.engines import MIGRATIONS, make_engine, migrate
from app.store.tables import Event, Job, SessionToken, SlackOutbox, WorkItemUsage

pytestmark = pytest.mark.empty_database  # each test migrates to an older revision first
ITEM = "github:o/r#7"
BEFORE = "0012"


def _alembic(engine: Engine, step: Callable[[Config, str], None], revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        step(cfg, revision)


def _old_rows(engine: Engine) -> None:
    now = datetime.now(UTC)
    payload = json.dumps({"kind": "stop", "work_item": ITEM, "repo": "o/r", "reason": "x"})
    with engine.begin() as db:
        db.execute(
            text("INSERT INTO events (ts, event, work_item, data) VALUES (:ts, 'e', :i, '{}')"),
            {"ts": now, "i": ITEM},
        )
        db.execute(
            text(
                "INSERT INTO jobs (key, kind, work_item, repo_full_name, payload, state, "
                "attempts, created_at, updated_at) "
                "VALUES ('stop@7', 'stop', :i, 'o/r', :p, 'queued', 0, :ts, :ts)"
            ),
            {"i": ITEM, "p": payload, "ts": now},
        )
        db.execute(
            text(
                "INSERT INTO session_tokens (token_hash, work_item, created_at, expires_at) "
                "VALUES ('h', :i, :ts, :ts)"
            ),
            {"i": ITEM, "ts": now},
        )
        db.execute(
            text(
                "INSERT INTO slack_outbox (work_item, kind, payload, state, attempts, "
                "next_attempt_at, created_at) VALUES (:i, 'k', '{}', 'queued', 0, :ts, :ts)"
            ),
            {"i": ITEM, "ts": now},
        )
        db.execute(
            text(
                "INSERT INTO work_item_usage (work_item, input_tokens, output_tokens, "
                "cache_read_input_tokens, cache_creation_input_tokens, requests, tool_calls, "
                "active_ms, updated_at) VALUES (:i, 5, 0, 0, 0, 1, 0, 0, :ts)"
            ),
            {"i": ITEM, "ts": now},
        )


def test_rows_stored_before_the_rename_are_found_by_their_item_after_it(database_url: str) -> None:
    engine = make_engine(database_url)
    _alembic(engine, command.upgrade, BEFORE)
    _old_rows(engine)
    migrate(engine)
    with Session(engine) as db:
        assert db.scalars(select(Event.event).where(Event.work_item_id == ITEM)).all() == ["e"]
        job = db.scalars(select(Job).where(Job.work_item_id == ITEM)).one()
        assert parse_payload(job.kind, job.payload).work_item_id == ITEM
        assert db.get(SessionToken, "h").work_item_id == ITEM
        assert db.scalars(select(SlackOutbox.work_item_id)).all() == [ITEM]
        assert db.get(WorkItemUsage, ITEM).input_tokens == 5
    engine.dispose()


def test_the_rename_downgrades_to_the_old_names(database_url: str) -> None:
    engine = make_engine(database_url)
    _alembic(engine, command.upgrade, BEFORE)
    _old_rows(engine)
    migrate(engine)
    _alembic(engine, command.downgrade, BEFORE)
    with engine.connect() as db:
        row = db.execute(text("SELECT work_item, payload FROM jobs")).one()
    engine.dispose()
    assert row[0] == ITEM
    payload = row[1] if isinstance(row[1], dict) else json.loads(row[1])
    assert payload["work_item"] == ITEM and "work_item_id" not in payload
