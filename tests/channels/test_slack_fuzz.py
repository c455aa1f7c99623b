"""Every pure Slack text function takes any string (hypothesis draws them): nothing raises,
nothing outgrows Slack's limits, and no drawn text becomes a mention Slack would act on."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.gate.markers import find_marker
from channels.allow_blocks import parse_allow_value
from channels.answer_blocks import parse_answer_value
from channels.blocks import Kind, render
from channels.checklist_control import execute_text, pressed_tokens
from channels.deps import attributed
from channels.replies import starts_with_keyword
from channels.review_actions import changes_text
from channels.text import (
    FALLBACK_LIMIT,
    SECTION_LIMIT,
    from_slack,
    strip_markers,
    to_mrkdwn,
    to_plain,
    unescape,
)
from channels.walk_blocks import changes_modal, session_words

# What Slack acts on in mrkdwn: `<!here>`, `<!channel>`, `<@U…>` and `<#C…>`.
MENTION = re.compile(r"<[!@#]")
EVENTS = [
    "session.spawned",
    "session.respawned",
    "session.delivered",
    "session.delivery_failed",
    "session.spawn_failed",
    "session.stalled",
    "session.answered",
    "session.answer_failed",
    "session.exited",
    "closed",
    "opened",
    "refused",
    "allowed",
]
# Any string, and strings built from the pieces Slack and GitHub markup are made of, which
# plain random text seldom spells.
PIECES = [
    "<",
    ">",
    "!",
    "@",
    "#",
    "|",
    "&",
    "*",
    "`",
    "_",
    "-",
    "[",
    "]",
    "(",
    ")",
    "\n",
    "\x00",
    "<!here>",
    "<!channel>",
    "<@U024BE7LH>",
    "<#C123|dev>",
    "https://",
    "http://x.dev/",
    "&lt;",
    "&amp;",
    "<!--",
    "-->",
    "the-loop:",
    "**",
    "\x007\x00",
]
text = st.text(max_size=24) | st.lists(
    st.sampled_from(PIECES) | st.text(max_size=3), max_size=8
).map("".join)
words = st.lists(text, max_size=3)
checklist_row = st.fixed_dictionaries({"token": text, "label": text, "checked": st.booleans()})
checklist_section = st.fixed_dictionaries(
    {
        "kind": text,
        "title": text,
        "single": st.booleans(),
        "default": st.none() | text,
        "rows": st.lists(checklist_row, max_size=3),
    }
)
SHAPED = {
    "event": st.sampled_from(EVENTS) | text,
    "artifacts": words,
    "options": words,
    "phases": st.lists(st.tuples(text, text), max_size=3),
    "pull_request": st.fixed_dictionaries({"number": text, "html_url": text}),
    "skips": st.dictionaries(text, text, max_size=2),
    "dropped": st.lists(st.fixed_dictionaries({"token": text, "reason": text}), max_size=2),
    "sections": st.lists(checklist_section, max_size=2),
    "decisions": st.fixed_dictionaries({"phase-selection": st.fixed_dictionaries({"by": text})}),
}
CHOICE = "harness model effort"
# The payload keys each kind's renderer reads (an unknown kind renders any payload).
KEYS = {
    Kind.ITEM_STARTED: "repo issue_number title",
    Kind.CHECKLIST: "keyword sections",
    Kind.CONFIRMATION: f"markdown skips dropped decisions {CHOICE}",
    Kind.REFUSED: "who why",
    Kind.SESSION: f"event reason detail error author screen question hint options fingerprint "
    f"by option choice exit_code {CHOICE}",
    Kind.AGENT_COMMENT: "body kind",
    Kind.PROGRESS: f"repo issue_number title phases artifacts status stall stall_hint "
    f"pull_request phase {CHOICE}",
    Kind.REVIEW: "artifacts approve_keyword changes_keyword",
    Kind.DONE: "reason",
    Kind.PULL_REQUEST: "number html_url event by",
    Kind.EGRESS: "event target live markdown",
    "something-new": "title body",
}


def payloads(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    keys = [*KEYS[kind].split(), "url"]
    return st.fixed_dictionaries({}, optional={key: SHAPED.get(key, text) for key in keys})


def mrkdwn_texts(value: Any) -> Iterator[str]:
    """Every `text` string in a block tree that Slack reads as mrkdwn."""
    if isinstance(value, dict):
        if value.get("type") == "mrkdwn" and isinstance(value.get("text"), str):
            yield value["text"]
        for inner in value.values():
            yield from mrkdwn_texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from mrkdwn_texts(inner)


@pytest.mark.parametrize("kind", list(KEYS))
def test_every_message_kind_renders_any_strings_within_slack_limits(kind: str) -> None:
    @settings(max_examples=150, deadline=None)
    @given(payloads(kind), text, text)
    def renders(payload: dict[str, Any], work_item_id: str, url: str) -> None:
        message = render(kind, payload, work_item_id, url)
        json.dumps(message.as_kwargs())  # what the Web API is sent
        assert len(message.text) <= FALLBACK_LIMIT
        assert not MENTION.search(message.text), message.text
        for mrkdwn in mrkdwn_texts(message.blocks):
            assert len(mrkdwn) <= SECTION_LIMIT
            assert not MENTION.search(mrkdwn), mrkdwn

    renders()


@given(text)
def test_markdown_conversions_take_any_string(markdown: str) -> None:
    mrkdwn, plain = to_mrkdwn(markdown), to_plain(markdown)
    assert len(mrkdwn) <= SECTION_LIMIT and len(plain) <= FALLBACK_LIMIT
    assert not MENTION.search(mrkdwn) and not MENTION.search(plain)
    assert not re.search("<!--.*?-->", strip_markers(markdown), re.DOTALL)


@given(text)
def test_link_placeholders_in_the_text_itself_are_only_text(noise: str) -> None:
    markdown = f"\x007\x00 \x000\x00 [docs](https://example.com)\n{noise}"
    assert "<https://example.com|docs>" in to_mrkdwn(markdown)


@given(text, st.dictionaries(text, text, max_size=3))
def test_slack_text_back_to_markdown_takes_any_string(slack: str, users: dict[str, str]) -> None:
    assert isinstance(from_slack(slack, users), str)
    assert isinstance(unescape(slack), str)


@given(text, text, text, text, text)
def test_the_small_text_helpers_take_any_string(
    value: str, keyword: str, login: str, member: str, thread: str
) -> None:
    starts_with_keyword(value, keyword)
    parse_answer_value(value)
    parse_allow_value(value)
    found = find_marker(attributed(value, login, member))
    assert found is not None and found.kind == "slack"  # whatever the member wrote
    session_words({"status": value, "stall": keyword, "stall_hint": login})
    json.dumps(changes_modal(value, thread))
    view = {"state": {"values": {"the-loop-changes": {"the-loop-changes-input": {"value": value}}}}}
    assert isinstance(changes_text(view), str)


@given(st.lists(checklist_section, max_size=3), text, st.dictionaries(text, text, max_size=3))
def test_a_checklist_press_takes_any_strings(
    sections: list[dict[str, Any]], keyword: str, values: dict[str, Any]
) -> None:
    checklist = {"sections": sections, "keyword": keyword}
    assert isinstance(pressed_tokens(checklist, {"b": values}), set)
    assert execute_text(checklist, {}).startswith(keyword or "the-loop execute")
