"""The Slack thread's parent message (pure): the same facts as the progress comment."""

from __future__ import annotations

from typing import Any

from channels.walk_blocks import APPROVE_ACTION, CHANGES_ACTION, progress, review, session_words

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


def test_an_item_a_spend_cap_holds_says_why_it_waits() -> None:
    held = {**BASE, "status": "frozen", "queued": [1, 1], "waiting": "daily budget reached <x>"}
    assert session_words(held) == "waiting: daily budget reached &lt;x&gt;"
    assert session_words({**held, "status": "running"}) != session_words(held)


def test_the_parent_links_artifacts_branch_and_pull_request() -> None:
    blob = "https://github.com/o/r/blob/the-loop/issue-1/docs/specs/issue-1/design.md"
    tree = "https://github.com/o/r/tree/the-loop/issue-1"
    payload = {
        **BASE,
        "artifacts": ["design.md"],
        "links": {
            "branch": ["the-loop/issue-1", tree],
            "artifacts": [["docs/specs/issue-1/design.md", blob]],
        },
        "pull_request": {"number": 4, "html_url": "https://github.com/o/r/pull/4"},
    }
    body = progress(payload, "https://github.com/o/r/issues/1")[1][1]["text"]["text"]
    assert f"*Artifacts:* <{blob}|docs/specs/issue-1/design.md>" in body
    assert f"*Branch:* <{tree}|the-loop/issue-1>" in body
    assert "*Pull request:* <https://github.com/o/r/pull/4|#4>" in body


def test_a_link_that_is_not_a_plain_web_address_is_shown_as_text() -> None:
    payload = {
        **BASE,
        "links": {"branch": ["b<!channel>", "javascript:x"], "artifacts": [["a|b.md", "x|y"]]},
    }
    body = progress(payload, "")[1][1]["text"]["text"]
    assert "`b&lt;!channel&gt;`" in body and "`a|b.md`" in body and "<javascript" not in body


def test_an_approval_gate_message_names_the_phase_and_links_what_to_read() -> None:
    blob = "https://github.com/o/r/blob/the-loop/issue-1/docs/specs/issue-1/design.md"
    payload = {
        "gate": "approve-design",
        "phase": "design",
        "to_read": ["design.md"],
        "artifacts": ["design.md", "requirements.md"],
        "links": {"artifacts": [["docs/specs/issue-1/design.md", blob]]},
    }
    text, blocks = review(payload, "github:o/r#1")
    assert text == "design waits for approval: approve or request changes."
    assert "`design` waits for approval" in blocks[0]["text"]["text"]
    assert f"*Read:* <{blob}|docs/specs/issue-1/design.md>" in blocks[1]["text"]["text"]
    actions = [e["action_id"] for e in blocks[2]["elements"]]
    assert actions == [APPROVE_ACTION, CHANGES_ACTION]
    plain, _ = review({"artifacts": ["design.md"]}, "github:o/r#1")
    assert plain == "Ready for review: approve or request changes."
