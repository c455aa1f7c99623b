"""The Allow button under a refused host: the same `the-loop allow host:port` a person types
on GitHub, for a mapped and authorized member.

The press is acknowledged first. The reply is posted on the issue, attributed, and decided by
the App's allow rule (`app.workitems.decide.egress`), which queues the allow job that lets the live
session's proxy through; the message is updated to say who asked, or the member is told (only
them) why nothing happened. What the spawner did, and how to allow the host for good, comes
to the thread with the job's result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.workitems import Outcome, Status, allow_reply
from channels.allow_blocks import parse_allow_value
from channels.blocks import Message, section
from channels.deps import NOT_MAPPED, SlackDeps
from channels.text import escape


def _describe(outcome: Outcome | None) -> str:
    if outcome is None or outcome.status is Status.REPEAT:
        return "was already asked for; nothing changed"
    if outcome.status is Status.REFUSED:
        return f"was refused: {outcome.why}"
    if outcome.status is Status.NOT_A_WORK_ITEM:
        return "is for no work item the App knows; nothing changed"
    return "is on its way to the session's proxy"


def handle_allow(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    """Everything after the ack of an Allow press."""
    container = body.get("container") or {}
    action = (body.get("actions") or [{}])[0]
    member = str((body.get("user") or {}).get("id", ""))
    channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id", ""))
    message_ts, thread_ts = str(container.get("message_ts") or ""), container.get("thread_ts")
    parsed = parse_allow_value(str(action.get("value") or ""))
    item = deps.item(parsed[0]) if parsed else None
    if parsed is None or item is None:
        deps.tell(channel, member, "This button is for no work item the App knows.", thread_ts)
        return
    target = parsed[1]
    login, why = deps.refusal(item, member)
    if why is not None or login is None:
        deps.services.events.emit(
            "gate.refused",
            item.id,
            who=login or member,
            why=why,
            source="slack",
            member=member,
            action="allow",
        )
        deps.tell(channel, member, f"Not authorized: {why or NOT_MAPPED}.", thread_ts)
        return
    keyword = deps.config.routing.trigger.allow_keyword
    ident = str(body.get("trigger_id") or action.get("action_ts") or "")
    text = f"{keyword} {target}"
    outcome = deps.post_once(f"slack-allow:{ident}", item, login, member, text, allow_reply)
    if outcome is not None and outcome.status is Status.QUEUED and message_ts:
        said = (
            f":hourglass_flowing_sand: *@{escape(login)} asked to let `{escape(target)}` "
            "through*; the session's proxy opens it now."
        )
        fallback = f"@{escape(login)} asked to allow {escape(target)}."
        deps.update(channel, message_ts, Message(fallback, [section(said)]))
        return
    deps.tell(channel, member, f"Allow {target} {_describe(outcome)}.", thread_ts)
