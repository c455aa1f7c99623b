"""A person's reply in a work item's thread: onto the issue, and into the live session.

The reply is posted on the issue by the App, attributed and marked (so it is never read back
as input), then handed to the same delivery path a GitHub comment takes. A reply that starts
with the execute keyword is an execute, through the gate's one parser; one with the budget
keyword raises the item's budget, and one with the allow keyword lets the session through to
a refused host, as on GitHub. Each reply is handled
once (Slack retries events); it gets a reaction when the session has it (the sender adds
it when the spawner's `session.delivered` report is mirrored).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from app.workitems import Status, allow_reply, deliver_comment, gate_reply, raise_reply, verdict_of
from channels.actions import describe, submit_execute
from channels.deps import SlackDeps
from channels.replies import reply_ref, starts_with_keyword, thread_reply
from channels.text import from_slack

log = logging.getLogger(__name__)

EXECUTED_REACTION = "rocket"


def handle_message(deps: SlackDeps, event: Mapping[str, Any], bot_user_id: str | None) -> None:
    """Everything after the ack of a `message` event."""
    reply = thread_reply(event, deps.config.slack.channel, bot_user_id)
    if reply is None:
        return
    item = deps.item_for_thread(reply.thread_ts)
    if item is None:
        return
    login, why = deps.refusal(item, reply.user)
    if why is not None:
        deps.services.events.emit(
            "comment.ignored", item.id, who=login or reply.user, why=why, source="slack"
        )
        deps.tell(reply.channel, reply.user, f"Not authorized: {why}.", reply.thread_ts)
        return
    assert login is not None
    text = from_slack(reply.text, deps.config.slack.users)
    if starts_with_keyword(text, deps.keyword):
        ref = f"slack-execute:{reply.channel}:{reply.ts}"
        executed = submit_execute(deps, item, login, reply.user, text, ref)
        if executed is None:
            return
        if executed.status is Status.FROZEN:
            deps.react(reply.channel, reply.ts, EXECUTED_REACTION)
        else:
            deps.tell(reply.channel, reply.user, f"Execute {describe(executed)}.", reply.thread_ts)
        return
    trigger = deps.config.routing.trigger
    if verdict_of(text, trigger.approve_keyword, trigger.changes_keyword) is not None:
        ref = f"slack-review:{reply.channel}:{reply.ts}"
        decided = deps.post_once(ref, item, login, reply.user, text, gate_reply)
        if decided is not None and decided.status is Status.REFUSED:
            deps.tell(reply.channel, reply.user, f"Refused: {decided.why}.", reply.thread_ts)
        return
    if starts_with_keyword(text, trigger.budget_keyword):
        ref = f"slack-budget:{reply.channel}:{reply.ts}"
        raised = deps.post_once(ref, item, login, reply.user, text, raise_reply)
        if raised is not None:
            said = (
                "Budget raised."
                if raised.status is Status.RECORDED
                else f"Budget not raised ({raised.why or raised.status.value})."
            )
            deps.tell(reply.channel, reply.user, said, reply.thread_ts)
        return
    if starts_with_keyword(text, trigger.allow_keyword):
        ref = f"slack-allow:{reply.channel}:{reply.ts}"
        allowed = deps.post_once(ref, item, login, reply.user, text, allow_reply)
        if allowed is not None and allowed.status is Status.REFUSED:
            deps.tell(reply.channel, reply.user, f"Refused: {allowed.why}.", reply.thread_ts)
        return
    ref = reply_ref(reply.channel, reply.ts)
    outcome = deps.post_once(ref, item, login, reply.user, text, deliver_comment)
    if outcome is not None and outcome.status is Status.NOT_LIVE:
        note = f"Posted on the issue; the work item is {item.state}, so no session receives it."
        deps.tell(reply.channel, reply.user, note, reply.thread_ts)
