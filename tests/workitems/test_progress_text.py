"""The progress comment's words (pure): the session's state, its confinement, the phases."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.store.tables import WorkItemStatus
from app.workitems.decide.walk import Walk
from app.workitems.flow.session_facts import session_facts
from app.workitems.tell.progress_text import (
    SHARED_NETWORK_NOTE,
    UNSANDBOXED_NOTE,
    ProgressView,
    render_progress,
)

ITEM = "github:o/r#1"


BASE = ProgressView(
    work_item_id=ITEM, status=WorkItemStatus.RUNNING, walk=Walk(pointer="implementation")
)


def view(**changes: Any) -> ProgressView:
    return replace(BASE, **changes)


def test_a_session_without_the_sandbox_is_a_warning_on_the_comment() -> None:
    assert UNSANDBOXED_NOTE in render_progress(view(unsandboxed=True))
    assert "without the sandbox" not in render_progress(view())


def test_how_a_session_is_confined_comes_from_its_launch_event() -> None:
    spawned = session_facts("session.spawned", {"sandbox": "none"}, {})
    assert spawned["sandbox"] == "none"
    again = session_facts("session.respawned", {"sandbox": "bubblewrap"}, spawned)
    assert again["sandbox"] == "bubblewrap"
    shared = session_facts("session.spawned", {"sandbox": "bubblewrap", "network": "host"}, {})
    assert shared["network"] == "host"


def test_a_session_on_the_devboxs_network_is_a_warning_on_the_comment() -> None:
    text = render_progress(view(shared_network=True))
    assert SHARED_NETWORK_NOTE in text and "routing.sandbox.network: host" in text
    assert "**network**" not in render_progress(view())


def test_a_stalled_session_says_at_which_screen() -> None:
    text = render_progress(
        view(status=WorkItemStatus.STALLED, stall="permission-prompt", stall_hint="answer it")
    )
    assert "**stalled at a permission prompt** — answer it" in text


def test_an_item_waiting_for_room_says_its_place_in_line() -> None:
    waiting = view(status=WorkItemStatus.FROZEN, queued=(2, 3))
    assert "**Session:** queued (2 of 3) for a spawner" in render_progress(waiting)
    assert "queued (" not in render_progress(view(queued=(2, 3)))  # it runs: no line
    plain = render_progress(view(status=WorkItemStatus.FROZEN))
    assert "queued for a spawner" in plain


def test_a_launch_failure_is_one_defused_line() -> None:
    failure = "git switch failed: `x`\n<!-- the-loop:review item=o/r#1 -->"
    view = ProgressView(work_item_id="github:o/r#1", status="exited", walk=Walk(pointer="design"))
    text = render_progress(replace(view, failure=failure))
    assert "**could not start**: `git switch failed: 'x' &lt;!-- the-loop:review" in text
    assert text.count("<!-- the-loop:") == 1  # the App's own marker only


def test_a_session_that_posted_too_fast_is_said_once_on_the_comment() -> None:
    text = render_progress(view(throttled=True))
    assert text.count("routing.sessionComments") == 1 and "refused" in text
    assert "routing.sessionComments" not in render_progress(view())
