"""Execute from Slack: the pressed checklist becomes a typed execute reply on the issue.

The press is acknowledged before anything here runs (Slack allows 3 s). The member must be
mapped and authorized; then the state of the radios and checkboxes at the moment of the
press is composed into exactly the text a person would type on GitHub, posted on the issue
as the App with attribution (the ledger record), and run through the gate's one parser.
The message is then updated to show what was sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.store import WorkItem
from app.workitems import Outcome, Status, execute_reply
from channels import blocks, outbox
from channels.checklist_control import execute_text
from channels.deps import NOT_MAPPED, SlackDeps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Press:
    """The facts of one Execute press, read from Slack's signed interaction payload."""

    member: str
    channel: str
    message_ts: str
    thread_ts: str | None
    work_item_id: str
    ref: str
    values: Mapping[str, Any]

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Press:
        container = body.get("container") or {}
        action = (body.get("actions") or [{}])[0]
        channel = container.get("channel_id") or (body.get("channel") or {}).get("id", "")
        ident = body.get("trigger_id") or action.get("action_ts") or container.get("message_ts")
        return cls(
            member=str((body.get("user") or {}).get("id", "")),
            channel=str(channel),
            message_ts=str(container.get("message_ts") or (body.get("message") or {}).get("ts")),
            thread_ts=container.get("thread_ts"),
            work_item_id=str(action.get("value") or ""),
            ref=f"slack-execute:{ident}",
            values=(body.get("state") or {}).get("values") or {},
        )


NOT_A_WORK_ITEM = "This is not a work item the App knows."
ALREADY = "Already executed: the selection is frozen."
NO_CHECKLIST = "The checklist for this item was not found; execute on GitHub instead."

OUTCOME_TEXT = {
    Status.FROZEN: "selection frozen; the session is starting",
    Status.ALREADY_FROZEN: "already frozen; nothing changed",
    Status.NOT_A_WORK_ITEM: "not a work item; nothing changed",
}


def describe(outcome: Outcome) -> str:
    """A short human account of the gate's answer."""
    if outcome.status is Status.REFUSED:
        return f"refused: {outcome.why}"
    if outcome.status is Status.CHANGED:
        return f"not started: {outcome.why}"
    return OUTCOME_TEXT.get(outcome.status, str(outcome.status))


def submit_execute(
    deps: SlackDeps, item: WorkItem, login: str, member: str, text: str, ref: str
) -> Outcome | None:
    """Post the attributed ledger comment and run the text through the gate, once per `ref`.

    Returns the gate's outcome, or None when this `ref` was already submitted.
    """
    return deps.post_once(ref, item, login, member, text, execute_reply)


def refuse(deps: SlackDeps, press: Press, who: str, why: str, work_item_id: str | None) -> None:
    """Record the refusal and tell the member privately; nothing else happens."""
    deps.services.events.emit(
        "gate.refused", work_item_id, who=who, why=why, source="slack", member=press.member
    )
    deps.tell(press.channel, press.member, f"Not authorized: {why}.", press.thread_ts)


def handle_execute(deps: SlackDeps, body: Mapping[str, Any]) -> None:
    """Everything after the ack of an Execute press."""
    press = Press.from_body(body)
    if deps.login_for(press.member) is None:
        refuse(deps, press, press.member, NOT_MAPPED, press.work_item_id or None)
        return
    item = deps.item(press.work_item_id)
    if item is None:
        deps.tell(press.channel, press.member, NOT_A_WORK_ITEM, press.thread_ts)
        return
    login, why = deps.refusal(item, press.member)
    if why is not None:
        refuse(deps, press, login or press.member, why, item.id)
        return
    assert login is not None
    if item.frozen is not None:
        deps.update(
            press.channel, press.message_ts, blocks.checklist_closed(item.frozen, item.html_url)
        )
        deps.tell(press.channel, press.member, ALREADY, press.thread_ts)
        return
    with deps.sessions() as session:
        checklist = outbox.latest_payload(session, item.id, blocks.Kind.CHECKLIST)
    if checklist is None:
        deps.tell(press.channel, press.member, NO_CHECKLIST, press.thread_ts)
        return
    text = execute_text(checklist, press.values)
    outcome = submit_execute(deps, item, login, press.member, text, press.ref)
    if outcome is None:
        return
    if outcome.status is Status.FROZEN and outcome.frozen is not None:
        deps.update(
            press.channel, press.message_ts, blocks.checklist_closed(outcome.frozen, item.html_url)
        )
    else:
        deps.tell(press.channel, press.member, f"Execute {describe(outcome)}.", press.thread_ts)
