"""The event log: file and table agree; an event inside a rolled-back transaction is not written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import EventLog, read_jsonl
from app.protocol import LEGACY_ITEM_KEY
from app.store.engines import make_engine, migrate
from app.store.tables import Event

ROOT = Path(__file__).resolve().parents[2]


def events_cli(path: Path, *args: str) -> str:
    """The stdout of `the-loop events --file <path> --json <args>`, run as a real process."""
    command = [sys.executable, "-m", "app.cli", "events", "--file", str(path), "--json", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_events_in_a_transaction_reach_the_file_only_on_commit(tmp_path, database_url):
    engine = make_engine(database_url)
    migrate(engine)
    log = EventLog(tmp_path / "events.jsonl", engine)
    try:
        with Session(engine) as session, session.begin():
            log.emit("gate.frozen", "github:o/r#1", session=session, by="octocat")
        try:
            with Session(engine) as session, session.begin():
                log.emit("gate.frozen", "github:o/r#2", session=session, by="mallory")
                raise RuntimeError("handler failed")
        except RuntimeError:
            pass
        log.emit("webhook.rejected", reason="bad-signature")
        lines = list(read_jsonl(tmp_path / "events.jsonl"))
        assert [(r["event"], r["work_item_id"]) for r in lines] == [
            ("gate.frozen", "github:o/r#1"),
            ("webhook.rejected", None),
        ]
        with Session(engine) as session:
            rows = [e.data for e in session.scalars(select(Event).order_by(Event.id))]
        assert rows == lines
    finally:
        engine.dispose()


def test_events_command_filters_and_prints_json(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.emit("session.spawned", "github:o/r#1", harness="claude", harness_args=["--x"])
    log.emit("session.delivered", "github:o/r#1")
    log.emit("session.spawned", "github:o/r#2", harness="claude", harness_args=[])
    path.open("a").write('{"torn line\n')
    out = events_cli(path, "--event", "session.spawned", "--work-item", "github:o/r#1")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["event"], r["harness_args"]) for r in records] == [("session.spawned", ["--x"])]
    family = events_cli(path, "--event", "session")
    assert len(family.splitlines()) == 3


def test_lines_an_older_release_wrote_are_found_by_their_work_item(tmp_path):
    """An events.jsonl kept across an upgrade: its old lines name the item by the older key."""
    path = tmp_path / "events.jsonl"
    old = {
        "ts": "2026-01-01T00:00:00+00:00",
        "event": "session.spawned",
        LEGACY_ITEM_KEY: "github:o/r#1",
    }
    path.write_text(json.dumps(old) + "\n")
    EventLog(path).emit("session.delivered", "github:o/r#1")
    out = events_cli(path, "--work-item", "github:o/r#1")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["event"], r["work_item_id"]) for r in records] == [
        ("session.spawned", "github:o/r#1"),
        ("session.delivered", "github:o/r#1"),
    ]
