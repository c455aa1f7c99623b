"""Which Slack message events are a person replying in a work item's thread. Pure.

Ignored: anything with a subtype (bot messages, `thread_broadcast` copies, edits, deletions,
joins), anything a bot or app wrote — including messages Slack echoes back without a
subtype but with `bot_id` — our own bot user's messages, top-level channel messages, and
messages in other channels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    channel: str
    user: str
    ts: str
    thread_ts: str
    text: str


def thread_reply(
    event: Mapping[str, Any], channel: str | None, bot_user_id: str | None
) -> Reply | None:
    """The human thread reply `event` carries, or None when it must be ignored."""
    if event.get("type") != "message" or event.get("subtype"):
        return None
    if event.get("bot_id") or event.get("app_id") or event.get("bot_profile"):
        return None
    user, ts, thread_ts = event.get("user"), event.get("ts"), event.get("thread_ts")
    if not user or not ts or not thread_ts or ts == thread_ts:
        return None
    if bot_user_id and user == bot_user_id:
        return None
    if channel and event.get("channel") != channel:
        return None
    text = str(event.get("text") or "").strip()
    if not text:
        return None
    return Reply(str(event["channel"]), str(user), str(ts), str(thread_ts), text)


def starts_with_keyword(text: str, keyword: str) -> bool:
    """True when `text` opens with the execute keyword (case-insensitive), as on GitHub."""
    return text.lstrip().lower().startswith(keyword.lower())


REPLY_REF_PREFIX = "slack-reply:"


def reply_ref(channel: str, ts: str) -> str:
    """The follow-up reference of a thread reply: names the Slack message it came from."""
    return f"{REPLY_REF_PREFIX}{channel}:{ts}"


def receipt_target(kind: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(channel, ts) of the Slack reply a mirrored `session.delivered` report is about."""
    if kind != "session" or payload.get("event") != "session.delivered":
        return None
    ref = str(payload.get("ref") or "")
    if payload.get("source") != "slack" or not ref.startswith(REPLY_REF_PREFIX):
        return None
    channel, _, ts = ref[len(REPLY_REF_PREFIX) :].partition(":")
    return (channel, ts) if channel and ts else None
