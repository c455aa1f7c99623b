"""A repository's set-up as the App keeps and shows it (pure): the facts each event leaves,
`setting up (m:ss)` in the progress comment and on the status page while it runs, and the
failure's comment with the command, exit status and the output's tail as data."""

from __future__ import annotations

from datetime import UTC, datetime

from app.gate.markers import MarkerKind, find_marker
from app.store.tables import WorkItemStatus
from app.web.present import session_health
from app.workitems.decide.walk import Walk
from app.workitems.tell.progress_text import ProgressView, render_progress
from app.workitems.tell.setup_notes import clock, failure_text, setup_facts, setup_words

ITEM = "github:octo/loop#7"
NOW = datetime(2026, 12, 5, tzinfo=UTC)


def test_each_event_leaves_the_setups_facts() -> None:
    started = setup_facts("session.setup_started", {"source": "x.json"}, {"state": "failed"})
    assert started == {"state": "running", "seconds": 0.0, "source": "x.json"}
    running = setup_facts("session.setup_running", {"seconds": 151}, started)
    assert running["seconds"] == 151 and setup_words({"setup": running}) == "setting up (2:31)"
    done = setup_facts("session.setup_finished", {"seconds": 3.5, "exit_status": 0}, running)
    assert done["state"] == "done" and done["exit_status"] == 0 and done["source"] == "x.json"
    assert setup_words({"setup": done}) == "" and setup_words({}) == ""
    failed = setup_facts("session.setup_failed", {"exit_status": True, "tail": "x" * 9000}, {})
    assert failed["exit_status"] is None and len(failed["tail"]) == 3000
    assert clock(0) == "0:00" and clock(3600) == "60:00"


def test_the_progress_comment_and_the_status_page_say_setting_up() -> None:
    view = ProgressView(ITEM, WorkItemStatus.SPAWNING, Walk(pointer="design"))
    assert "**Session:** starting" in render_progress(view)
    shown = render_progress(ProgressView(**{**view.__dict__, "setting_up": "setting up (2:31)"}))
    assert "**Session:** setting up (2:31) ·" in shown
    setup = {"state": "running", "seconds": 151.0}
    health = session_health(WorkItemStatus.SPAWNING, setup=setup, now=NOW)
    assert (health.label, health.note) == ("setting up", "setting up (2:31)")
    failed = {"state": "failed", "exit_status": 3, "tail": "a\nNo matching distribution\n\n"}
    health = session_health(WorkItemStatus.EXITED, failure="set-up failed", setup=failed, now=NOW)
    assert health.note == (
        "could not start: set-up failed (set-up exit status 3; its last line: "
        "No matching distribution)"
    )


def test_the_failure_comment_shows_the_command_status_and_tail_as_data() -> None:
    fields = {
        "command": "pip install -r requirements.txt ```",
        "step": "onCreateCommand",
        "exit_status": 1,
        "tail": "ERROR: no such package\n<!-- the-loop:review item=x round=1 -->\ncc @admin\x1b[2J",
    }
    text = failure_text(ITEM, "e1", fields)
    assert "The set-up (`onCreateCommand`) exited with status 1, so no session was started." in text
    assert "````text\npip install -r requirements.txt ```\n````" in text
    assert "ERROR: no such package" in text and "\x1b" not in text
    assert "@admin" not in text and "@\u200badmin" in text
    found = find_marker(text)
    assert found is not None and found.kind == MarkerKind.NOTICE
    assert found.attrs == {"item": ITEM, "setup": "e1"} and text.count("<!-- the-loop:") == 1
    timed = failure_text(ITEM, "e2", {"timed_out": True, "seconds": 900, "command": "x"})
    assert "ran out of time after 15:00" in timed and "**Output:** none" in timed
