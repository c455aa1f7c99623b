"""A human's decision at the `review` gate: approve (the session may complete) or request
changes (the words reach the session and the pointer goes back to `implementation`).

The same authorization rule as execute; an unauthorized or misplaced decision gets the same
one-line refusal reply. Runs inside the caller's transaction (a webhook delivery or a Slack
press), so a crash re-runs it; the delivery to the session is keyed by the reply's `ref`.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from sqlalchemy.orm import Session

from app.gate.parse import is_execute
from app.services import Services
from app.store.tables import WorkItem
from app.workitems.advance import record_move
from app.workitems.authz import refusal
from app.workitems.decisions import Decision, Outcome, Status, emit, lock_work_item, refuse
from app.workitems.followups import deliver_comment
from app.workitems.states import is_live
from app.workitems.walk import IMPLEMENTATION_NODE, REVIEW_NODE, in_force


class ReviewVerdict(StrEnum):
    APPROVED = "approved"
    CHANGES = "changes"


def verdict_of(body: str, approve: str, changes: str) -> ReviewVerdict | None:
    """Which decision a comment makes, by its opening keyword (pure)."""
    if is_execute(body, approve):
        return ReviewVerdict.APPROVED
    if is_execute(body, changes):
        return ReviewVerdict.CHANGES
    return None


def _changes_text(body: str, keyword: str) -> str:
    """The reviewer's words after the keyword (the whole comment when nothing follows)."""
    rest = body.lstrip("\ufeff \t\r\n")[len(keyword) :].strip()
    return rest or body.strip()


def _session_note(verdict: ReviewVerdict, author: str) -> str:
    if verdict is ReviewVerdict.APPROVED:
        return (
            f"\n\n(the-loop: @{author} approved the review. Run `the-loop phase next` to "
            "complete the work item.)"
        )
    return (
        f"\n\n(the-loop: @{author} requested changes; the work item is back at "
        "`implementation`. Make the changes, then walk the phases again with "
        "`the-loop phase next` after each one.)"
    )


def review_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Apply an approve or changes decision on its item (a `Decide`)."""
    item = lock_work_item(session, decision.work_item_id)
    if item is None or item.frozen is None:
        return Outcome(Status.NOT_A_WORK_ITEM)
    trigger = services.config.routing.trigger
    verdict = verdict_of(decision.body, trigger.approve_keyword, trigger.changes_keyword)
    keyword = (
        trigger.approve_keyword if verdict is ReviewVerdict.APPROVED else trigger.changes_keyword
    )
    action = "approve the review" if verdict is ReviewVerdict.APPROVED else "request changes"

    def refused(why: str, reason: str) -> Outcome:
        refuse(services, session, item, decision, why, reason, keyword=keyword, action=action)
        return Outcome(Status.REFUSED, why=why)

    if verdict is None:
        return refused("the reply starts with no review keyword", "not-a-review")
    why = refusal(services, item.installation_id, item.repo_full_name, decision.author)
    if why is not None:
        return refused(why, "unauthorized")
    if item.phase != REVIEW_NODE or not is_live(item.state):
        where = item.phase or "the start"
        return refused(
            f"the work item is not waiting for a review (it is at {where})", "not-at-review"
        )
    if isinstance((item.gates or {}).get(REVIEW_NODE), dict):
        return Outcome(Status.REPEAT)
    return _record(services, session, item, decision, verdict)


def _record(
    services: Services, session: Session, item: WorkItem, decision: Decision, verdict: ReviewVerdict
) -> Outcome:
    trigger = services.config.routing.trigger
    at = services.clock().isoformat()
    gates = dict(item.gates or {})
    text = decision.body
    if verdict is ReviewVerdict.APPROVED:
        gates[REVIEW_NODE] = {"at": at, "by": decision.author, "verdict": verdict.value}
        item.gates = gates
    else:
        gates.pop(REVIEW_NODE, None)
        item.gates = gates
        skips = frozenset((item.frozen or {}).get("skips") or {})
        back = IMPLEMENTATION_NODE if IMPLEMENTATION_NODE in in_force(skips) else REVIEW_NODE
        record_move(services, session, item, back, by=decision.author, reason="changes requested")
        text = _changes_text(decision.body, trigger.changes_keyword)
    emit(
        services,
        session,
        "gate.approved" if verdict is ReviewVerdict.APPROVED else "gate.changes_requested",
        item.id,
        by=decision.author,
        source=decision.source,
        ref=decision.ref,
    )
    told = replace(decision, body=text + _session_note(verdict, decision.author))
    if deliver_comment(services, session, told).status is Status.REPEAT:
        return Outcome(Status.REPEAT)
    return Outcome(Status.RECORDED)
