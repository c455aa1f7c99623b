"""Block Kit rendering: snapshots of every message kind, and the rules every message keeps."""

from __future__ import annotations

from typing import Any

import pytest

from app.workitems.decide.egress import refused_words
from channels.blocks import Kind, checklist_closed, render
from channels.checklist_control import EXECUTE_ACTION, OPEN_ACTION
from tests.fakes.slack_api import block_problems
from tests.slack_support import ISSUE_URL, assert_snapshot, sample_checklist

ITEM = "github:Codertocat/Hello-World#1"

PAYLOADS: dict[str, dict[str, Any]] = {
    Kind.ITEM_STARTED: {
        "title": "Spelling error in the README <script> & more",
        "repo": "Codertocat/Hello-World",
        "issue_number": 1,
        "url": ISSUE_URL,
    },
    Kind.CHECKLIST: sample_checklist(phases=12),
    Kind.CONFIRMATION: {
        "markdown": "**Selection frozen** by @octocat.\n\n- [x] design\n- [ ] test-planning\n\n"
        "See [the docs](https://example.com/docs).\n<!-- the-loop:confirmation -->",
        "harness": "claude",
        "model": "opus",
        "effort": "",
        "skips": {"test-planning": {"by": "octocat"}},
        "dropped": [{"token": "model-gpt", "reason": "not offered on claude"}],
        "url": ISSUE_URL,
    },
    Kind.REFUSED: {"who": "mallory", "why": "@mallory has 'read' permission", "url": ISSUE_URL},
    Kind.SESSION: {
        "event": "session.spawned",
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "url": ISSUE_URL,
    },
    Kind.PULL_REQUEST: {
        "event": "opened",
        "number": 101,
        "html_url": "https://github.com/Codertocat/Hello-World/pull/101",
        "by": "session",
        "url": ISSUE_URL,
    },
    Kind.EGRESS: {
        "event": "refused",
        "target": "pypi.example.org:443",
        "markdown": refused_words("pypi.example.org:443", "", "the-loop allow"),
        "url": ISSUE_URL,
    },
    Kind.AGENT_COMMENT: {
        "kind": "ask",
        "body": "## Question\nShould `design.md` cover <!channel> the **API**?",
        "url": ISSUE_URL,
    },
}


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_each_kind_matches_its_snapshot(kind: str) -> None:
    message = render(kind, PAYLOADS[kind], ITEM)
    assert_snapshot(kind, {"text": message.text, "blocks": message.blocks})


@pytest.mark.parametrize("kind", [*PAYLOADS, "something_new"])
def test_every_message_has_fallback_text_and_an_open_on_github_button(kind: str) -> None:
    payload = PAYLOADS.get(kind, {"detail": "x", "url": ISSUE_URL})
    message = render(kind, payload, ITEM)
    assert message.text.strip()
    buttons = [
        element
        for block in message.blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if element.get("action_id") == OPEN_ACTION
    ]
    assert [b["url"] for b in buttons] == [ISSUE_URL]
    assert block_problems(message.blocks) == []


@pytest.mark.parametrize("phases", [1, 10, 11, 23])
def test_phase_checkboxes_are_chunked_to_ten_options(phases: int) -> None:
    message = render(Kind.CHECKLIST, sample_checklist(phases=phases), ITEM)
    groups = [b["element"] for b in message.blocks if b["type"] == "input"]
    phase_groups = [g for g in groups if g["options"][0]["value"].startswith("phase-")]
    assert [len(g["options"]) for g in phase_groups] == [
        min(10, phases - start) for start in range(0, phases, 10)
    ]
    assert all(g["type"] == "checkboxes" for g in phase_groups)
    assert block_problems(message.blocks) == []


def test_choice_sections_are_radios_with_the_default_pre_selected() -> None:
    message = render(Kind.CHECKLIST, sample_checklist(), ITEM)
    radios = {
        b["element"]["options"][0]["value"].split("-")[0]: b["element"]
        for b in message.blocks
        if b["type"] == "input" and b["element"]["type"] == "radio_buttons"
    }
    assert set(radios) == {"harness", "model", "effort"}
    assert radios["harness"]["initial_option"]["value"] == "harness-claude"
    assert radios["effort"]["initial_option"]["value"] == "effort-medium"
    assert "initial_option" not in radios["model"]  # no default model: nothing pre-selected


def test_a_choice_section_larger_than_radios_allow_becomes_a_select() -> None:
    checklist = sample_checklist()
    rows = [{"token": f"model-m{i}", "label": f"m{i}", "checked": i == 3} for i in range(12)]
    checklist["sections"][3]["rows"] = rows
    message = render(Kind.CHECKLIST, checklist, ITEM)
    element = next(
        b["element"]
        for b in message.blocks
        if b["type"] == "input" and b["element"]["options"][0]["value"] == "model-m0"
    )
    assert element["type"] == "static_select"
    assert element["initial_option"]["value"] == "model-m3"
    assert block_problems(message.blocks) == []


def test_only_sections_the_checklist_shows_are_rendered() -> None:
    checklist = sample_checklist()
    checklist["sections"] = checklist["sections"][:1]  # phases only, as when nothing is declared
    message = render(Kind.CHECKLIST, checklist, ITEM)
    inputs = [b for b in message.blocks if b["type"] == "input"]
    assert [b["label"]["text"] for b in inputs] == ["Phases"]
    execute = [
        e
        for b in message.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == EXECUTE_ACTION
    ]
    assert [e["value"] for e in execute] == [ITEM]


def test_text_from_github_cannot_mention_or_link_in_slack() -> None:
    message = render(Kind.AGENT_COMMENT, PAYLOADS[Kind.AGENT_COMMENT], ITEM)
    body = message.blocks[1]["text"]["text"]
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    title = render(Kind.ITEM_STARTED, PAYLOADS[Kind.ITEM_STARTED], ITEM).blocks[0]["text"]["text"]
    assert "<script>" not in title and "&lt;script&gt; &amp; more" in title


def test_long_agent_comments_are_cut_to_slack_limits() -> None:
    message = render(Kind.AGENT_COMMENT, {"kind": "comment", "body": "word " * 5000}, ITEM)
    assert block_problems(message.blocks) == []
    assert len(message.text) <= 4000
    assert message.blocks[1]["text"]["text"].endswith("…")


def test_markers_never_show_in_slack() -> None:
    message = render(Kind.CONFIRMATION, PAYLOADS[Kind.CONFIRMATION], ITEM)
    rendered = str(message.blocks) + message.text
    assert "the-loop:confirmation" not in rendered


FROZEN = {
    "decisions": {"phase-selection": {"at": "2026-01-01T00:00:00+00:00", "by": "octocat"}},
    "skips": {"test-planning": {"by": "octocat"}},
    "harness": "claude",
    "model": "",
    "effort": "high",
    "dropped": [{"token": "model-gpt", "reason": "not offered"}],
}


def test_a_frozen_checklist_matches_its_snapshot_and_has_no_controls() -> None:
    message = checklist_closed(FROZEN, ISSUE_URL)
    assert_snapshot("checklist_closed", {"text": message.text, "blocks": message.blocks})
    assert not any(b["type"] == "input" for b in message.blocks)
    assert block_problems(message.blocks) == []
