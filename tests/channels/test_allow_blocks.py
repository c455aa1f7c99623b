"""The refused-host message in a Slack thread (pure): the App's own words, one Allow button
that asks for exactly the host the notice named, and the answer without a button."""

from __future__ import annotations

from typing import Any

from app.workitems.decide.egress import allowed_words, refused_words
from channels.allow_blocks import ALLOW_ACTION, parse_allow_value
from channels.blocks import Kind, render
from tests.fakes.slack_api import block_problems

ITEM = "github:Codertocat/Hello-World#1"
URL = "https://github.com/Codertocat/Hello-World/issues/1"


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        element
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if element.get("action_id") == ALLOW_ACTION
    ]


def refused(target: str) -> dict[str, Any]:
    words = refused_words(target, "", "the-loop allow")
    return {"event": "refused", "target": target, "markdown": words, "url": URL}


def test_a_refused_host_shows_the_issue_words_and_one_allow_button_for_that_host() -> None:
    message = render(Kind.EGRESS, refused("[::1]:8080"), ITEM)
    shown = str(message.blocks)
    assert "The session's network refused *`[::1]:8080`*" in shown
    assert "reply `the-loop allow [::1]:8080`" in shown and "routing.sandbox.egress" in shown
    (button,) = buttons(message.blocks)
    assert button["text"]["text"] == "Allow [::1]:8080"
    assert parse_allow_value(button["value"]) == (ITEM, "[::1]:8080")
    assert message.text.startswith("The session's network refused `[::1]:8080`")
    assert block_problems(message.blocks) == []


def test_a_long_host_keeps_its_whole_name_in_the_value_and_a_label_slack_takes() -> None:
    host = "a" * 60 + ".example.org:443"
    (button,) = buttons(render(Kind.EGRESS, refused(host), ITEM).blocks)
    assert len(button["text"]["text"]) <= 75 and button["text"]["text"].endswith("…")
    assert parse_allow_value(button["value"]) == (ITEM, host)


def test_the_answer_says_how_to_allow_it_for_good_and_offers_no_button() -> None:
    for live, icon in ((True, ":white_check_mark:"), (False, ":x:")):
        words = allowed_words("x.test:443", "octocat", live)
        payload = {"event": "allowed", "target": "x.test:443", "live": live, "markdown": words}
        message = render(Kind.EGRESS, {**payload, "url": URL}, ITEM)
        assert buttons(message.blocks) == []
        assert message.blocks[0]["text"]["text"].startswith(icon)
        assert "add `x.test:443` to `routing.sandbox.egress`" in str(message.blocks)


def test_a_value_that_is_no_allow_button_is_refused() -> None:
    assert parse_allow_value("github:o/r#1") is None
    assert parse_allow_value("\nx.test:443") is None
    assert parse_allow_value("github:o/r#1\nx.test:443\nmore") is None
