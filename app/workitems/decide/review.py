"""A human's decision at a gate that waits for one — `review`, or an approval gate after a
phase (`approve-design`, `approve-tasks`): approve (the session may go on) or request changes
(the words reach the session and the pointer goes back to the phase the gate judges:
`implementation` for review, `design` or `tasks-breakdown` for an approval gate). One code
path for every such gate, parameterised by the node the item waits at.

The same authorization rule as execute; an unauthorized or misplaced decision gets the same
one-line refusal reply. Runs inside the caller's transaction (a webhook delivery or a Slack
press), so a crash re-runs it; the delivery to the session is keyed by the reply's `ref`.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from sqlalchemy.orm import Session

from app.gate import says_command
from app.github import Services
from app.store import WorkItem
from app.workitems.decide.advance import record_move, walk_of
from app.workitems.decide.decisions import Decision, Outcome, Status, emit, lock_work_item, refuse
from app.workitems.decide.followups import deliver_comment
from app.workitems.decide.walk import (
    COMPLETE_NODE,
    REVIEW_NODE,
    approved_phase,
    changes_go_to,
    is_approval_gate,
    is_decision_gate,
    next_in_force,
)
from app.workitems.flow.authz import refusal
from app.workitems.flow.states import is_live


class ReviewVerdict(StrEnum):
    APPROVED = "approved"
    CHANGES = "changes"


def verdict_of(body: str, approve: str, changes: str) -> ReviewVerdict | None:
    """Which decision a comment makes, by its opening keyword (pure)."""
    if says_command(body, approve):
        return ReviewVerdict.APPROVED
    if says_command(body, changes):
        return ReviewVerdict.CHANGES
    return None


def _changes_text(body: str, keyword: str) -> str:
    """The reviewer's words after the keyword (the whole comment when nothing follows)."""
    rest = body.lstrip("\ufeff \t\r\n")[len(keyword) :].strip()
    return rest or body.strip()


def session_note(verdict: ReviewVerdict, author: str, gate: str, to: str) -> str:
    """What the session is told after the human's words (pure): for an approval, how to go on
    (`to`: the node after the gate); for changes, where the item is back (`to`)."""
    if verdict is ReviewVerdict.APPROVED:
        what = "the review" if gate == REVIEW_NODE else f"`{approved_phase(gate)}` at `{gate}`"
        step = "complete the work item" if to == COMPLETE_NODE else f"go on to `{to}`"
        return f"\n\n(the-loop: @{author} approved {what}. Run `the-loop phase next` to {step}.)"
    return (
        f"\n\n(the-loop: @{author} requested changes at `{gate}`; the work item is back at "
        f"`{to}`. Make the changes, then walk the phases again with `the-loop phase next` "
        "after each one.)"
    )


def gate_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Apply an approve or changes decision at the gate its item waits at (a `Decide`)."""
    item = lock_work_item(session, decision.work_item_id)
    if item is None or item.frozen is None:
        return Outcome(Status.NOT_A_WORK_ITEM)
    trigger = services.config.routing.trigger
    verdict = verdict_of(decision.body, trigger.approve_keyword, trigger.changes_keyword)
    keyword = (
        trigger.approve_keyword if verdict is ReviewVerdict.APPROVED else trigger.changes_keyword
    )
    gate = item.phase or ""
    what = f"`{gate}`" if is_approval_gate(gate) else "the review"
    action = f"approve {what}" if verdict is ReviewVerdict.APPROVED else "request changes"

    def refused(why: str, reason: str) -> Outcome:
        refuse(services, session, item, decision, why, reason, keyword=keyword, action=action)
        return Outcome(Status.REFUSED, why=why)

    if verdict is None:
        return refused("the reply starts with no approve or changes keyword", "not-a-review")
    why = refusal(services, item.installation_id, item.repo_full_name, decision.author)
    if why is not None:
        return refused(why, "unauthorized")
    if not is_decision_gate(gate) or not is_live(item.state):
        where = gate or "the start"
        return refused(
            f"the work item is not waiting for an approval (it is at {where})", "not-at-review"
        )
    if isinstance((item.gates or {}).get(gate), dict):
        return Outcome(Status.REPEAT)
    return _record(services, session, item, decision, verdict)


def _record(
    services: Services, session: Session, item: WorkItem, decision: Decision, verdict: ReviewVerdict
) -> Outcome:
    trigger = services.config.routing.trigger
    at = services.clock().isoformat()
    gate = item.phase or ""
    gates = dict(item.gates or {})
    skips = walk_of(item).skips
    text = decision.body
    if verdict is ReviewVerdict.APPROVED:
        gates[gate] = {"at": at, "by": decision.author, "verdict": verdict.value}
        item.gates = gates
        to = next_in_force(gate, skips) or COMPLETE_NODE
    else:
        gates.pop(gate, None)
        item.gates = gates
        to = changes_go_to(gate, skips)
        record_move(services, session, item, to, by=decision.author, reason="changes requested")
        text = _changes_text(decision.body, trigger.changes_keyword)
    emit(
        services,
        session,
        "gate.approved" if verdict is ReviewVerdict.APPROVED else "gate.changes_requested",
        item.id,
        by=decision.author,
        source=decision.source,
        ref=decision.ref,
        gate=gate,
    )
    told = replace(decision, body=text + session_note(verdict, decision.author, gate, to))
    if deliver_comment(services, session, told).status is Status.REPEAT:
        return Outcome(Status.REPEAT)
    return Outcome(Status.RECORDED)
