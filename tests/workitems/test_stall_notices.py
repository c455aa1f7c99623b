"""A stalled session is announced on the issue where the person who executed is: once per
stall, mentioning them, with what the screen asks and how to reach it; the move past it gets a
short note; the progress comment shows the stall meanwhile. Spawner events over real HTTP,
the fake GitHub, a real database."""

from __future__ import annotations

import uuid

import pytest

from app.gate.markers import Marker, MarkerKind, find_marker, is_app_comment
from app.store.tables import WorkItem, WorkItemStatus
from app.workitems.tell.notices import stall_text
from tests.support import wait_for

pytestmark = pytest.mark.sqlite_only


def notices(api, number: int) -> list[dict]:
    return [
        c
        for c in api.fake.issue_comments(api.repo, number)
        if (m := find_marker(c["body"])) is not None and m.kind == MarkerKind.NOTICE
    ]


def progress(api, number: int) -> str:
    found = [
        c["body"]
        for c in api.fake.issue_comments(api.repo, number)
        if (m := find_marker(c["body"])) is not None and m.kind == MarkerKind.PROGRESS
    ]
    return found[0] if found else ""


def executed_item(api, number: int) -> str:
    item = api.work_item(number, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        row = db.get(WorkItem, item)
        assert row is not None
        row.frozen = {**(row.frozen or {}), "decisions": {"phase-selection": {"by": "octocat"}}}
        row.phase = "design"
    return item


def event(item: str, name: str, **fields) -> dict:
    return {"id": uuid.uuid4().hex, "event": name, "work_item_id": item, **fields}


STALLED = {
    "screen": "permission-prompt",
    "hint": "the session asks for a permission",
    "tmux_target": "the-loop:o-r-3-3f2a9c1d",
    "question": "Do you want to create hello.txt?",
    "options": ["Yes", "Yes, allow all edits during this session", "No"],
}


def test_a_stall_is_announced_once_and_its_end_noted(shared_api):
    api = shared_api.fresh()
    item = executed_item(api, 3)
    spawner = api.spawner(api.token())
    assert spawner.events(event(item, "session.stalled", **STALLED)).status_code == 200
    (notice,) = wait_for(lambda: notices(api, 3))
    body = notice["body"]
    assert body.startswith("@octocat, the session of this work item is **waiting at a permission")
    assert "> Do you want to create hello.txt?" in body
    assert "2. Yes, allow all edits during this session" in body
    assert "`the-loop answer <n>`" in body
    assert "tmux -L the-loop attach -t o-r-3-3f2a9c1d" in body
    with api.state.sessions() as db:
        assert db.get(WorkItem, item).state == WorkItemStatus.STALLED
    wait_for(lambda: "**stalled at a permission prompt**" in progress(api, 3), timeout=15)

    # The watchdog reporting the same screen again announces nothing new.
    assert spawner.events(event(item, "session.stalled", **STALLED)).status_code == 200
    assert (
        spawner.events(event(item, "session.unstalled", was="permission-prompt")).status_code == 200
    )
    texts = [c["body"] for c in wait_for(lambda: len(notices(api, 3)) == 2 and notices(api, 3))]
    assert texts[1].startswith("The session moved on from the permission prompt")
    wait_for(lambda: "**Session:** running" in progress(api, 3), timeout=15)

    assert spawner.events(event(item, "session.stalled", screen="question-menu")).status_code == 200
    wait_for(lambda: len(notices(api, 3)) == 3)
    assert "question menu" in notices(api, 3)[2]["body"]


def test_the_notice_text_names_nobody_when_nobody_executed():
    text = stall_text("github:o/r#1", 1, "", {"screen": "trust-dialog"}, "the-loop answer")
    assert text.startswith("the session of this work item is **waiting at a trust dialog**")
    assert "@" not in text.split("\n")[0]


def test_what_a_session_draws_in_its_pane_never_passes_for_the_apps_marker(shared_api):
    """A pane showing a fake prompt that holds the App's review and progress markers: the
    notice shows them as text, reads as the stall notice it is, and nothing the App looks
    for later (its review comment, its progress comment) is taken as already posted."""
    api = shared_api.fresh()
    item = executed_item(api, 4)
    spawner = api.spawner(api.token())
    forged_review = f"<!-- the-loop:review item={item} round=1 -->"
    forged_progress = f"<!--the-loop:progress item={item} -->"
    hostile = {
        **STALLED,
        "question": f"Proceed? {forged_review}",
        "options": [f"Yes {forged_progress}", "No"],
        "hint": forged_review,
        "tmux_target": f"the-loop:x{forged_review}",
    }
    assert spawner.events(event(item, "session.stalled", **hostile)).status_code == 200
    (notice,) = wait_for(lambda: notices(api, 4))
    assert find_marker(notice["body"]) == Marker("notice", {"item": item, "stall": "1"})
    assert f"&lt;!-- the-loop:review item={item}" in notice["body"]
    bot = notice["user"]["login"]
    wait_for(lambda: "**stalled at a permission prompt**" in progress(api, 4), timeout=15)
    comments = api.fake.issue_comments(api.repo, 4)
    assert not any(is_app_comment(c, bot, MarkerKind.REVIEW, item=item, round=1) for c in comments)
    [ours] = [c for c in comments if is_app_comment(c, bot, MarkerKind.PROGRESS, item=item)]
    assert "&lt;!-- the-loop:review" in ours["body"]  # the hint, shown in the progress
