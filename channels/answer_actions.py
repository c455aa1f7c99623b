"""An option button pressed under a stalled session's question: the same answer a person
types on GitHub (`the-loop answer <n>`), for a mapped and authorized member.

The press is acknowledged first. The answer is posted on the issue, attributed and pinned to
the question the button was shown for, then runs through the App's answer rule; the message
is updated to say who answered what, or the member is told (only them) why nothing happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.workitems import Outcome, Status, answer_reply, answer_text
from channels.answer_blocks import parse_answer_value
from channels.blocks import Message, section
from channels.deps import NOT_MAPPED, SlackDeps


def _describe(outcome: Outcome | None) -> str:
    if outcome is None or outcome.status is Status.REPEAT:
        return "was already given; nothing changed"
    if outcome.status is Status.REFUSED:
        return f"was refused: {outcome.why}"
    if outcome.status is Status.NOT_A_WORK_ITEM:
        return "is for no work item the App knows; nothing changed"
    return "is on its way to the session"


def handle_answer(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    container = body.get("container") or {}
    action = (body.get("actions") or [{}])[0]
    member = str((body.get("user") or {}).get("id", ""))
    channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id", ""))
    message_ts, thread_ts = str(container.get("message_ts") or ""), container.get("thread_ts")
    parsed = parse_answer_value(str(action.get("value") or ""))
    item = deps.item(parsed[0]) if parsed else None
    if parsed is None or item is None:
        deps.tell(channel, member, "This button is for no work item the App knows.", thread_ts)
        return
    _, choice, fingerprint = parsed
    login, why = deps.refusal(item, member)
    if why is not None or login is None:
        deps.services.events.emit(
            "gate.refused", item.id, who=login or member, why=why, source="slack", member=member
        )
        deps.tell(channel, member, f"Not authorized: {why or NOT_MAPPED}.", thread_ts)
        return
    keyword = deps.config.routing.trigger.answer_keyword
    ident = str(body.get("trigger_id") or action.get("action_ts") or "")
    text = answer_text(keyword, choice, fingerprint)
    outcome = deps.post_once(f"slack-answer:{ident}", item, login, member, text, answer_reply)
    if outcome is not None and outcome.status is Status.QUEUED and message_ts:
        said = (
            f":hourglass_flowing_sand: *@{login} answered {choice}. {outcome.option}*; "
            "sending it to the session."
        )
        deps.update(channel, message_ts, Message(f"@{login} answered {choice}.", [section(said)]))
        return
    deps.tell(channel, member, f"Your answer {choice} {_describe(outcome)}.", thread_ts)
