"""Approve and Request changes from Slack: the same decision a reviewer types on GitHub.

A press is acknowledged first. The member must be mapped and authorized (the execute rule);
Approve then posts `the-loop approve` on the issue, attributed, and runs it through the gate
the item waits at (review or an approval gate); Request changes opens a modal for the
reviewer's words, and its submission posts `the-loop changes <words>` the same way. The
message is updated to say what was decided.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError

from app.workitems import Outcome, Status, gate_reply
from channels.blocks import Message, section
from channels.deps import NOT_MAPPED, SlackDeps
from channels.errors import slack_error
from channels.walk_blocks import CHANGES_BLOCK, CHANGES_INPUT, changes_modal

log = logging.getLogger(__name__)


def _press(body: Mapping[str, Any]) -> tuple[str, str, str, str | None, str, str]:
    """(member, channel, message ts, thread ts, work item, ref) of a button press."""
    container = body.get("container") or {}
    action = (body.get("actions") or [{}])[0]
    ident = body.get("trigger_id") or action.get("action_ts") or ""
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id", "")
    return (
        str((body.get("user") or {}).get("id", "")),
        str(channel),
        str(container.get("message_ts") or ""),
        container.get("thread_ts"),
        str(action.get("value") or ""),
        str(ident),
    )


def _describe(outcome: Outcome | None) -> str:
    if outcome is None or outcome.status is Status.REPEAT:
        return "already decided; nothing changed"
    if outcome.status is Status.REFUSED:
        return f"refused: {outcome.why}"
    if outcome.status is Status.NOT_A_WORK_ITEM:
        return "not a work item; nothing changed"
    return "recorded; the session has it"


def _decide(
    deps: SlackDeps, member: str, work_item_id: str, text: str, ref: str
) -> tuple[Outcome | None, str | None, str | None]:
    """Run `text` through the item's gate for `member`: (outcome, login, why not)."""
    item = deps.item(work_item_id)
    if item is None:
        return None, None, "this is not a work item the App knows"
    login, why = deps.refusal(item, member)
    if why is not None or login is None:
        deps.services.events.emit(
            "gate.refused", item.id, who=login or member, why=why, source="slack", member=member
        )
        return None, login, why or NOT_MAPPED
    return deps.post_once(ref, item, login, member, text, gate_reply), login, None


def handle_approve(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    member, channel, message_ts, thread_ts, work_item_id, ident = _press(body)
    keyword = deps.config.routing.trigger.approve_keyword
    outcome, login, why = _decide(deps, member, work_item_id, keyword, f"slack-approve:{ident}")
    if why is not None:
        deps.tell(channel, member, f"Not authorized: {why}.", thread_ts)
        return
    if outcome is not None and outcome.status is Status.RECORDED and message_ts:
        done = f":white_check_mark: *Approved by @{login}.* The session goes on."
        deps.update(channel, message_ts, Message(f"Approved by @{login}.", [section(done)]))
        return
    deps.tell(channel, member, f"Approve {_describe(outcome)}.", thread_ts)


def handle_changes_press(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    member, channel, _ts, thread_ts, work_item_id, _ident = _press(body)
    item = deps.item(work_item_id)
    why = "this is not a work item the App knows" if item is None else deps.refusal(item, member)[1]
    if why is not None:
        deps.tell(channel, member, f"Not authorized: {why}.", thread_ts)
        return
    view = changes_modal(work_item_id, f"{channel}:{thread_ts or ''}")
    try:
        deps.client.views_open(trigger_id=str(body.get("trigger_id") or ""), view=view)
    except (SlackApiError, OSError) as exc:
        log.warning("opening the changes modal failed: %s", slack_error(exc))
        keyword = deps.config.routing.trigger.changes_keyword
        deps.tell(channel, member, f"Reply here with `{keyword} <what to change>`.", thread_ts)


def changes_text(view: Mapping[str, Any]) -> str:
    """The reviewer's words from a submitted changes modal (pure)."""
    values = ((view.get("state") or {}).get("values") or {}).get(CHANGES_BLOCK) or {}
    return str((values.get(CHANGES_INPUT) or {}).get("value") or "").strip()


def handle_changes_view(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    view = body.get("view") or {}
    member = str((body.get("user") or {}).get("id", ""))
    work_item_id, _, thread = str(view.get("private_metadata") or "").partition("\n")
    channel, _, thread_ts = thread.partition(":")
    words = changes_text(view)
    keyword = deps.config.routing.trigger.changes_keyword
    ref = f"slack-changes:{view.get('id') or view.get('hash') or ''}"
    outcome, _login, why = _decide(deps, member, work_item_id, f"{keyword} {words}".strip(), ref)
    if channel:
        said = f"Not authorized: {why}." if why else f"Request changes {_describe(outcome)}."
        deps.tell(channel, member, said, thread_ts or None)
