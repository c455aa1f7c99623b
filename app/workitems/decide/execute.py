"""An execute reply, from any surface, through the one parser and the one authorization rule.

`execute_reply` is called by the GitHub `issue_comment.created` handler, the labels that
execute (`autoexecute`) and the Slack mirror's Execute button, each with its `Decision`.
It checks who is replying, reads the ticks (a checklist in the reply wins over the
checklist comment's current boxes), freezes the selection once, queues one spawn job and
owes the issue one confirmation. A `base:<branch>` word on the execute line names the branch
the work starts from and its pull request targets; GitHub is asked that it exists before
anything is frozen, and a base it does not have is refused with one comment. It runs inside
the caller's transaction, so a crash re-runs it; every GitHub write is found-or-posted
through its marker. The confirmation is not written here: it is recorded on the item and
posted by the progress publisher once the transaction has committed
(`progress.publish_soon`), so the spawn job reaches a spawner without waiting for two
GitHub round trips.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.config import InteractionMode
from app.gate import (
    PHASE_SELECTION,
    Checklist,
    Selection,
    Tick,
    branch_name_ok,
    build_checklist,
    classify,
    confirmation_markdown,
    execute_base,
    frozen_record,
    initial_prompt,
    issue_base,
    parse_rows,
    says_command,
    spec_id,
    work_branch,
)
from app.github import IssueIO, PullIO, Services
from app.store import WorkItem, WorkItemStatus
from app.workitems.decide.decisions import Decision, Outcome, Status, emit, lock_work_item, refuse
from app.workitems.decide.walk import first_phase
from app.workitems.flow.authz import refusal
from app.workitems.flow.issue_text import approved_record, ask_again, read_approved
from app.workitems.flow.jobs import enqueue, spawn_job
from app.workitems.flow.offers import current_offer
from app.workitems.flow.states import RUN_AGAIN, Happened, transition
from app.workitems.spend.spending import restart_run
from app.workitems.tell.progress import publish_soon


def _refuse(
    services: Services, session: Session, item: WorkItem, decision: Decision, why: str, reason: str
) -> Outcome:
    keyword = services.config.routing.trigger.execute_keyword
    refuse(services, session, item, decision, why, reason, keyword=keyword)
    return Outcome(Status.REFUSED, why=why)


def _not_parked_reason(item: WorkItem, label: str) -> str:
    if item.state == WorkItemStatus.UNLABELED:
        return f"the `{label}` label was removed; add it again to start this work item"
    return f"the work item is {item.state}, not waiting for an execute"


def _base_refusal(services: Services, item: WorkItem, base: str) -> tuple[str, str] | None:
    """Why `base` (an execute's `base:` word) cannot be the item's base branch, and the
    reason's code; None when it can: a name git takes and, for an item on GitHub, a branch
    GitHub has now. A name git refuses is not echoed back."""
    if not branch_name_ok(base) or "`" in base:
        return "the `base:` word names no branch git accepts (`base:release/2.4`)", "bad-base"
    if item.installation_id is None:
        return None
    if not PullIO(services.github, item.installation_id, item.repo_full_name).branch_exists(base):
        return f"the branch `{base}` does not exist in {item.repo_full_name}", "no-such-base"
    return None


def _board(
    io: IssueIO | None, item: WorkItem, checklist: Checklist, reply: tuple[Tick, ...]
) -> tuple[Tick, ...]:
    """The checklist comment's current rows, unless the reply already answers every row."""
    answered = {t.token for t in reply}
    if io is None or item.checklist_comment_id is None:
        return ()
    if all(r.token in answered for r in checklist.rows()):
        return ()
    return parse_rows(io.comment_body(item.checklist_comment_id))


def _select(
    services: Services, session: Session, item: WorkItem, io: IssueIO | None, body: str
) -> Selection:
    offer = current_offer(session, services.config)
    checklist = build_checklist(offer, services.config.routing.trigger.execute_keyword)
    reply_rows = parse_rows(body)
    return classify(offer, checklist, _board(io, item, checklist, reply_rows), reply_rows)


def _prompt(services: Services, item: WorkItem, selection: Selection, title: str, body: str) -> str:
    unattended = services.config.interaction_mode is InteractionMode.WORK_ITEM
    labelled_pull = item.pull_number if item.pull_number == item.issue_number else None
    return initial_prompt(
        title=title,
        body=body,
        url=item.html_url,
        spec_id=spec_id(item.issue_number),
        selection=selection,
        unattended=unattended,
        branch=item.branch or "",
        pull_number=labelled_pull,
    )


def _confirm(
    services: Services,
    session: Session,
    item: WorkItem,
    selection: Selection,
    frozen: dict[str, Any],
    again: str | None = None,
) -> None:
    """Owe the issue the one confirmation comment (the progress publisher posts it after the
    commit) and mirror it. `again` is the ref of an execute after a closed pull request:
    that run gets a confirmation of its own."""
    author = frozen["decisions"][PHASE_SELECTION]["by"]
    markdown = confirmation_markdown(selection, author, item.id, again, frozen.get("base", ""))
    if item.installation_id is not None:  # an item GitHub can be written about
        item.confirmation_owed = markdown
        publish_soon(session, item)
    mirrored = {"markdown": markdown, **_choice_fields(selection, frozen), "url": item.html_url}
    services.mirror.post(session, item.id, "confirmation", mirrored)


def _choice_fields(selection: Selection, frozen: dict[str, Any]) -> dict[str, Any]:
    return {
        "harness": selection.harness,
        "model": selection.model,
        "effort": selection.effort,
        "skips": list(selection.skips),
        "stops": frozen["stops"],
        "dropped": frozen["dropped"],
    }


def _freeze(
    services: Services,
    session: Session,
    item: WorkItem,
    decision: Decision,
    issue: dict[str, Any] | None,
    base: str | None = None,
) -> Outcome:
    """Freeze the selection (with its `base` branch: the reply's, else the one the issue
    names on a `base:` line, else "" for the default), queue the spawn job, owe the issue
    its confirmation."""
    io = None
    if item.installation_id is not None:
        io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
    reading = read_approved(item, io, issue)
    if reading.change is not None:  # edited since it was read: the human approves anew
        why = ask_again(services, session, item, io, reading, decision.author, decision.ref)
        return Outcome(Status.CHANGED, why=why)
    if base is None:  # the reply names none: the issue's `base:` line, else the default
        base = issue_base(reading.body) or ""
        refused = _base_refusal(services, item, base) if base else None
        if refused is not None:
            return _refuse(services, session, item, decision, *refused)
    selection = _select(services, session, item, io, decision.body)
    frozen = frozen_record(selection, decision.author, services.clock(), base)
    again = decision.ref if item.state in RUN_AGAIN else None
    frozen["issue"] = approved_record(item, reading)
    item.frozen = frozen
    transition(item, Happened.EXECUTED)
    item.phase = first_phase(selection.skips)  # the human passed the start gate by executing
    item.gates = None  # an execute after a closed pull request starts the walk afresh
    if item.budget is not None:
        restart_run(session, item, services.clock())  # …and its budget afresh
    prefix = services.config.routing.pull_requests.branch_prefix
    item.branch = item.branch or work_branch(prefix, item.issue_number)
    fields = _choice_fields(selection, frozen)
    emit(
        services,
        session,
        "gate.frozen",
        item.id,
        by=decision.author,
        source=decision.source,
        ref=decision.ref,
        **fields,
    )
    _confirm(services, session, item, selection, frozen, again)
    prompt = _prompt(services, item, selection, reading.title, reading.body)
    job = spawn_job(item, title=reading.title, prompt=prompt)
    queued = enqueue(services, session, f"spawn:{decision.ref}", job)
    return Outcome(
        Status.FROZEN,
        job_id=queued.id if queued is not None else None,
        frozen=frozen,
    )


def execute_reply(
    services: Services,
    session: Session,
    decision: Decision,
    *,
    issue: dict[str, Any] | None = None,
) -> Outcome:
    """Run an execute `decision` (its author a GitHub login) on its item (a `Decide`).

    `decision.ref` is the idempotency key (the GitHub comment id, or a Slack action id).
    The issue is re-read from GitHub (`issue`, the delivery's issue object, stands in when
    it cannot be) and must be what was pinned with the checklist, or the execute is
    answered `CHANGED`.
    """
    item = lock_work_item(session, decision.work_item_id)
    if item is None:
        return Outcome(Status.NOT_A_WORK_ITEM)
    config = services.config
    keyword = config.routing.trigger.execute_keyword
    if not says_command(decision.body, keyword):
        return _refuse(
            services,
            session,
            item,
            decision,
            f"the reply does not start with `{keyword}`",
            "not-an-execute",
        )
    why = refusal(services, item.installation_id, item.repo_full_name, decision.author)
    if why is not None:
        return _refuse(services, session, item, decision, why, "unauthorized")
    again = item.state in RUN_AGAIN
    if item.frozen is not None and not again:
        emit(
            services,
            session,
            "gate.execute_ignored",
            item.id,
            who=decision.author,
            source=decision.source,
            ref=decision.ref,
            comment_id=decision.comment_id,
            reason="already-frozen",
        )
        return Outcome(Status.ALREADY_FROZEN, frozen=item.frozen)
    if item.state != WorkItemStatus.PARKED and not again:
        why = _not_parked_reason(item, config.routing.trigger.label)
        return _refuse(services, session, item, decision, why, "not-parked")
    base = execute_base(decision.body, keyword)
    refused = _base_refusal(services, item, base) if base is not None else None
    if refused is not None:  # before anything is frozen or queued
        return _refuse(services, session, item, decision, *refused)
    return _freeze(services, session, item, decision, issue, base)
