"""A spawner upgraded in place reads what its older release left on disk: the sessions it
runs (`sessions.json`) and the events it had not sent yet name their work item by the older
key, and neither is lost."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from app.protocol import LEGACY_ITEM_KEY
from app.spawner.eventqueue import outgoing
from app.spawner.registry import Registry, SessionRecord

ITEM = "github:o/r#3"


def test_a_session_recorded_by_an_older_release_is_still_known(tmp_path: Path) -> None:
    required = [f.name for f in fields(SessionRecord) if f.default is f.default_factory is MISSING]
    values = {name: "x" for name in required if name != "work_item_id"}
    record = SessionRecord(work_item_id=ITEM, **{**values, "harness_args": []})
    stored = {
        (LEGACY_ITEM_KEY if k == "work_item_id" else k): v for k, v in record.to_dict().items()
    }
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"sessions": {ITEM: stored}}))
    found = Registry(path).get(ITEM)
    assert found is not None and found.work_item_id == ITEM and found.tmux_session == "x"


def test_an_event_an_older_release_left_unsent_is_sent_with_its_item() -> None:
    line = {"ts": "2026-01-01T00:00:00+00:00", "event": "session.exited", LEGACY_ITEM_KEY: ITEM}
    sent = outgoing(line)
    assert sent["work_item_id"] == ITEM and LEGACY_ITEM_KEY not in sent
    assert sent["reported_ts"] == line["ts"]
