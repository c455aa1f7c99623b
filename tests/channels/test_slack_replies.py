"""Which message events are a person replying in a thread, over the published payloads."""

from __future__ import annotations

import copy

import pytest

from channels.replies import Reply, starts_with_keyword, thread_reply
from tests.support import fixture_json

CHANNEL = "C08REALCHAN1"
BOT = "U08REALBOT1"


def event(name: str) -> dict:
    return copy.deepcopy(fixture_json(f"slack/{name}.json")["event"])


def test_a_human_thread_reply_is_taken() -> None:
    reply = thread_reply(event("event_callback.message.thread_reply"), CHANNEL, BOT)
    assert reply == Reply(
        CHANNEL, "U08REALUSER1", "1775407883.655979", "1775407823.782829", "ping?"
    )


@pytest.mark.parametrize(
    "name",
    [
        "event_callback.message.bot_in_thread",  # bot_id without a subtype
        "event_callback.message.bot_message_subtype",  # subtype bot_message, no user
        "event_callback.message.thread_broadcast",  # the channel copy of a thread reply
        "event_callback.app_mention",  # not a message event
    ],
)
def test_bot_messages_broadcasts_and_other_events_are_ignored(name: str) -> None:
    assert thread_reply(event(name), None, BOT) is None


def test_our_own_bot_user_is_ignored_even_without_bot_fields() -> None:
    own = event("event_callback.message.thread_reply")
    own["user"] = BOT
    assert thread_reply(own, CHANNEL, BOT) is None


def test_edits_top_level_messages_and_other_channels_are_ignored() -> None:
    edited = event("event_callback.message.thread_reply")
    edited["subtype"] = "message_changed"
    top = event("event_callback.message.thread_reply")
    top["thread_ts"] = top["ts"]
    no_thread = event("event_callback.message.thread_reply")
    del no_thread["thread_ts"]
    assert thread_reply(edited, CHANNEL, BOT) is None
    assert thread_reply(top, CHANNEL, BOT) is None
    assert thread_reply(no_thread, CHANNEL, BOT) is None
    assert thread_reply(event("event_callback.message.thread_reply"), "C0OTHER", BOT) is None


def test_the_execute_keyword_is_recognised_like_on_github() -> None:
    assert starts_with_keyword("  The-Loop Execute\n- [x] design", "the-loop execute")
    assert not starts_with_keyword("please the-loop execute", "the-loop execute")
