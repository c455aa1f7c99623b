"""A session's refused host in the item's Slack thread, with an Allow button, and the answer
once the host is let through (pure).

The words are the App's (`app.workitems.decide.egress` writes them for the issue and the thread
alike); this only turns them into Block Kit. The button's value carries the work item and
the `host:port`, so a press asks for exactly the host the notice was shown for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channels.answer_blocks import LABEL_LIMIT
from channels.text import SECTION_LIMIT, escape, to_mrkdwn, to_plain, truncate

ALLOW_ACTION = "the-loop-allow"
VALUE_LIMIT = 2000  # Slack's button value limit


def allow_value(work_item_id: str, target: str) -> str:
    return f"{work_item_id}\n{target}"


def parse_allow_value(value: str) -> tuple[str, str] | None:
    """(work item, `host:port`) of a button's value; None when it is not one."""
    work_item_id, sep, target = value.partition("\n")
    if not sep or not work_item_id or not target or "\n" in target:
        return None
    return work_item_id, target


def allow_button(work_item_id: str, target: str) -> dict[str, Any] | None:
    """The actions block whose one button asks to let `target` through; None when the value
    would not fit a button."""
    value = allow_value(work_item_id, target)
    if len(value) > VALUE_LIMIT:
        return None
    return {
        "type": "actions",
        "block_id": "the-loop-allow",
        "elements": [
            {
                "type": "button",
                "action_id": ALLOW_ACTION,
                "text": {"type": "plain_text", "text": truncate(f"Allow {target}", LABEL_LIMIT)},
                "value": value,
            }
        ],
    }


def egress(payload: Mapping[str, Any], work_item_id: str) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) of an `egress` mirror row: a refused host, or its answer."""
    markdown = str(payload.get("markdown") or "")
    target = str(payload.get("target") or "")
    if payload.get("event") == "allowed":
        icon = ":white_check_mark:" if payload.get("live") else ":x:"
        return to_plain(markdown), [_section(f"{icon} {to_mrkdwn(markdown)}")]
    blocks = [_section(f":no_entry: {to_mrkdwn(markdown)}")]
    button = allow_button(work_item_id, target) if target and work_item_id else None
    if button is not None:
        note = f"Or press *Allow {escape(target)}* here: the same, for a member in `slack.users`."
        blocks += [_context(note), button]
    return to_plain(markdown), blocks


def _section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(mrkdwn, SECTION_LIMIT)}}


def _context(mrkdwn: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(mrkdwn, 3000)}]}
