"""The Slack thread's parent message (pure): the same facts as the progress comment."""

from __future__ import annotations

from typing import Any

from channels.walk_blocks import progress, session_words

BASE: dict[str, Any] = {
    "repo": "o/r",
    "issue_number": 1,
    "title": "Fix it",
    "status": "running",
    "phase": "implementation",
    "phases": [["implementation", "current"]],
    "artifacts": [],
}


def test_an_item_waiting_for_room_says_its_place_in_line() -> None:
    waiting = {**BASE, "status": "frozen", "queued": [1, 2]}
    assert session_words(waiting) == "queued (1 of 2) for a spawner"
    assert session_words({**BASE, "status": "frozen"}) == "queued for a spawner"
    _text, blocks = progress(waiting, "https://github.com/o/r/issues/1")
    assert "queued (1 of 2)" in blocks[1]["text"]["text"]
