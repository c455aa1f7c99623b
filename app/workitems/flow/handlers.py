"""A work item's lifecycle on GitHub: labelled → parked at the gate → frozen → … → closed.

Handlers for `issues.labeled` / `unlabeled` / `closed` and for the execute side of
`issue_comment.created` / `edited`. Each runs inside its delivery's transaction and is safe
to re-run: the work item row is locked, and every comment is found-or-posted by marker.
Non-execute comments are left to the follow-up handler.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.gate import (
    MarkerKind,
    build_checklist,
    is_own_comment,
    issue_base,
    render_checklist,
    says_command,
    spec_id,
    work_item_id_of,
)
from app.github import HandlerContext, IssueIO
from app.store import Job, JobKind, JobState, Once, WorkItem, WorkItemStatus, cancel
from app.workitems.decide.answer import answer_reply
from app.workitems.decide.decisions import Decide, Decision, Status, lock_work_item
from app.workitems.decide.egress import allow_reply
from app.workitems.decide.execute import execute_reply
from app.workitems.decide.review import gate_reply, verdict_of
from app.workitems.flow.capacity import hold_line, renumber
from app.workitems.flow.issue_text import record_pin
from app.workitems.flow.jobs import enqueue, stop_job
from app.workitems.flow.offers import current_offer
from app.workitems.flow.states import Happened, is_live, transition
from app.workitems.spend.spending import raise_reply

__all__ = ["spec_id", "work_item_id_of"]

NOT_AN_ITEM = Status.NOT_A_WORK_ITEM.value  # the reason a decision on no work item is logged

SPAWN_DEFERRED_REASON = "parked-at-human-start-gate"


def _issue_of(ctx: HandlerContext) -> dict[str, Any]:
    """The delivery's issue; a `pull_request.*` delivery's pull request stands in for it (a
    labelled pull request is a work item of its own)."""
    issue = ctx.payload.get("issue") or ctx.payload.get("pull_request") or {}
    return issue if isinstance(issue, dict) else {}


def _issue_ref(ctx: HandlerContext) -> tuple[str, int] | None:
    """(repo full name, issue number) of the delivery, or None when it names no issue."""
    repo = ctx.payload.get("repository") or {}
    issue = _issue_of(ctx)
    if not isinstance(repo.get("full_name"), str) or not isinstance(issue.get("number"), int):
        return None
    return repo["full_name"], issue["number"]


def _item_for(ctx: HandlerContext) -> WorkItem | None:
    ref = _issue_ref(ctx)
    if ref is None:
        return None
    return lock_work_item(ctx.session, work_item_id_of(*ref))


def _is_trigger(ctx: HandlerContext) -> bool:
    label = ctx.payload.get("label") or {}
    name = label.get("name")
    trigger = ctx.config.routing.trigger.label
    return isinstance(name, str) and name.casefold() == trigger.casefold()


def _new_item(ctx: HandlerContext, installation_id: int) -> WorkItem:
    """Record a newly labelled issue as a work item parked at the gate."""
    repo, issue = ctx.payload["repository"], _issue_of(ctx)
    item = WorkItem(
        id=work_item_id_of(repo["full_name"], issue["number"]),
        repo_full_name=repo["full_name"],
        issue_number=issue["number"],
        installation_id=installation_id,
        title=str(issue.get("title") or ""),
        html_url=str(issue.get("html_url") or ""),
        clone_url=str(repo.get("clone_url") or ""),
        state=WorkItemStatus.PARKED,
    )
    ctx.session.add(item)
    ctx.session.flush()
    by = (ctx.payload.get("sender") or {}).get("login")
    ctx.emit(
        "workitem.created",
        item.id,
        repo=item.repo_full_name,
        issue_number=item.issue_number,
        spec_id=spec_id(item.issue_number),
        by=by,
    )
    ctx.mirror.post(
        ctx.session,
        item.id,
        "item_started",
        {
            "title": item.title,
            "repo": item.repo_full_name,
            "issue_number": item.issue_number,
            "url": item.html_url,
        },
    )
    return item


def _once(ctx: HandlerContext, key: str) -> bool:
    """True the first time `key` is seen (the row joins this delivery's transaction)."""
    if ctx.session.get(Once, key) is not None:
        return False
    ctx.session.add(Once(key=key, ref=ctx.delivery_id))
    ctx.session.flush()
    return True


def _post_checklist(ctx: HandlerContext, item: WorkItem, installation_id: int) -> None:
    """Post the checklist (or adopt the one already posted) and mirror it."""
    io = IssueIO(ctx.github, installation_id, item.repo_full_name, item.issue_number)
    offer = current_offer(ctx.session, ctx.config)
    checklist = build_checklist(offer, ctx.config.routing.trigger.execute_keyword)
    # A labelled pull request is its own issue: its title and body are what is approved.
    issue = ctx.payload.get("issue") or ctx.payload.get("pull_request")
    repository = ctx.payload.get("repository")
    default = repository.get("default_branch") if isinstance(repository, dict) else None
    named = issue_base(issue.get("body")) if isinstance(issue, dict) else None
    body = render_checklist(checklist, item.id, default_branch=str(default or ""), named_base=named)
    comment_id, adopted = io.post_once(body, MarkerKind.CHECKLIST, item=item.id)
    item.checklist_comment_id = comment_id
    record_pin(item, issue if isinstance(issue, dict) else None, ctx.services)
    ctx.emit(
        "gate.checklist_posted",
        item.id,
        comment_id=comment_id,
        adopted=adopted,
        harnesses=list(offer.harnesses) if offer.harness_section else [],
        models=list(offer.model_rows),
        efforts=list(offer.efforts),
    )
    mirrored = checklist.to_mirror() | {"comment_id": comment_id, "url": item.html_url}
    ctx.mirror.post(ctx.session, item.id, "checklist", mirrored)
    if _once(ctx, f"eyes:{item.id}"):
        io.acknowledge()


def start_work_item(ctx: HandlerContext) -> None:
    """`issues.labeled` with the trigger label: create the item and post the checklist once."""
    ref = _issue_ref(ctx)
    if not _is_trigger(ctx) or ref is None:
        return
    installation_id = ctx.installation_id
    if installation_id is None:
        ctx.emit("workitem.ignored", work_item_id_of(*ref), reason="no-installation")
        return
    if _issue_of(ctx).get("state") == "closed":
        ctx.emit("workitem.ignored", work_item_id_of(*ref), reason="issue-closed")
        return
    item = _item_for(ctx) or _new_item(ctx, installation_id)
    if item.state in (WorkItemStatus.UNLABELED, WorkItemStatus.CLOSED):
        ctx.emit("workitem.relabeled", item.id, previous=item.state)
        transition(item, Happened.RELABELED)
    elif item.state != WorkItemStatus.PARKED or item.checklist_comment_id is not None:
        ctx.emit("workitem.label_ignored", item.id, state=item.state)
        return
    if item.checklist_comment_id is None:
        _post_checklist(ctx, item, installation_id)
    ctx.emit("session.spawn_deferred", item.id, reason=SPAWN_DEFERRED_REASON)


def park_unlabeled(ctx: HandlerContext) -> None:
    """`issues.unlabeled` of the trigger label before execute: no spawn until re-labelled."""
    if not _is_trigger(ctx):
        return
    item = _item_for(ctx)
    if item is None:
        return
    if transition(item, Happened.UNLABELED) is not None:
        ctx.emit("workitem.unlabeled", item.id)
    else:
        ctx.emit("workitem.unlabel_ignored", item.id, state=item.state)


def _cancel_queued_spawns(ctx: HandlerContext, item: WorkItem) -> list[int]:
    """Spawn jobs no spawner has claimed yet will never be needed once the issue is closed."""
    jobs = ctx.session.scalars(
        select(Job)
        .where(Job.work_item_id == item.id, Job.kind == JobKind.SPAWN, Job.state == JobState.QUEUED)
        .with_for_update(skip_locked=True)
    ).all()
    for job in jobs:
        cancel(job, "issue-closed")
    return [job.id for job in jobs]


def stop_on_close(ctx: HandlerContext) -> None:
    """`issues.closed`: stop a session that may be live; an unstarted item just closes.
    A waiting item leaves the line, so the line is held before the item is locked."""
    ref = _issue_ref(ctx)
    if ref is None or ctx.session.get(WorkItem, work_item_id_of(*ref)) is None:
        return  # not a work item: nothing to lock, the line is left alone
    hold_line(ctx.session)
    item = _item_for(ctx)
    if item is None:
        return
    previous = item.state
    if is_live(previous):
        cancelled = _cancel_queued_spawns(ctx, item)
        stop = stop_job(item, reason="issue-closed")
        enqueue(
            ctx.services, ctx.session, f"stop:{ctx.delivery_id}", stop, cancelled_spawns=cancelled
        )
    transition(item, Happened.CLOSED)
    if previous == WorkItemStatus.FROZEN:
        renumber(ctx.session, leaving=item)  # it no longer waits for a session
    ctx.emit("workitem.closed", item.id, previous=previous, state=item.state)


def _comment(ctx: HandlerContext) -> dict[str, Any] | None:
    comment = ctx.payload.get("comment")
    return comment if isinstance(comment, dict) else None


def freeze_on_execute(ctx: HandlerContext) -> None:
    """`issue_comment.created` starting with the execute keyword: run it through the gate."""
    comment, ref = _comment(ctx), _issue_ref(ctx)
    if comment is None or ref is None or is_own_comment(comment):
        return
    body = comment.get("body") or ""
    if not says_command(body, ctx.config.routing.trigger.execute_keyword):
        return
    decision = Decision.from_comment(work_item_id_of(*ref), comment)
    outcome = execute_reply(ctx.services, ctx.session, decision, issue=ctx.payload.get("issue"))
    if outcome.status is Status.NOT_A_WORK_ITEM:
        ctx.emit(
            "gate.execute_ignored",
            work_item_id_of(*ref),
            who=decision.author,
            comment_id=comment["id"],
            reason=NOT_AN_ITEM,
        )


def decide_review(ctx: HandlerContext) -> None:
    """`issue_comment.created` starting with the approve or changes keyword: a decision at
    the gate the item waits at (review or an approval gate)."""
    comment, ref = _comment(ctx), _issue_ref(ctx)
    if comment is None or ref is None or is_own_comment(comment):
        return
    body = str(comment.get("body") or "")
    trigger = ctx.config.routing.trigger
    if verdict_of(body, trigger.approve_keyword, trigger.changes_keyword) is None:
        return
    decision = Decision.from_comment(work_item_id_of(*ref), comment)
    if gate_reply(ctx.services, ctx.session, decision).status is Status.NOT_A_WORK_ITEM:
        ctx.emit(
            "gate.review_ignored", decision.work_item_id, who=decision.author, reason=NOT_AN_ITEM
        )


def _keyword_reply(ctx: HandlerContext, keyword: str, decide: Decide, ignored: str) -> None:
    """An `issue_comment.created` that starts with `keyword`, handed to `decide` as a human's
    decision; a comment on no work item is recorded as `ignored`."""
    comment, ref = _comment(ctx), _issue_ref(ctx)
    if comment is None or ref is None or is_own_comment(comment):
        return
    if not says_command(str(comment.get("body") or ""), keyword):
        return
    decision = Decision.from_comment(work_item_id_of(*ref), comment)
    if decide(ctx.services, ctx.session, decision).status is Status.NOT_A_WORK_ITEM:
        ctx.emit(ignored, decision.work_item_id, who=decision.author, reason=NOT_AN_ITEM)


def answer_question(ctx: HandlerContext) -> None:
    """The answer keyword: pick an option of the question the item's stalled session shows."""
    keyword = ctx.config.routing.trigger.answer_keyword
    _keyword_reply(ctx, keyword, answer_reply, "gate.answer_ignored")


def raise_budget(ctx: HandlerContext) -> None:
    """The budget keyword: add to the item's budget (or, alone, lift the spend caps)."""
    keyword = ctx.config.routing.trigger.budget_keyword
    _keyword_reply(ctx, keyword, raise_reply, "gate.budget_ignored")


def allow_host(ctx: HandlerContext) -> None:
    """The allow keyword: let the item's live session through to one more host."""
    keyword = ctx.config.routing.trigger.allow_keyword
    _keyword_reply(ctx, keyword, allow_reply, "gate.allow_ignored")


def log_execute_edit(ctx: HandlerContext) -> None:
    """`issue_comment.edited` of an execute comment: an edit never changes what was signed."""
    comment = _comment(ctx)
    if comment is None or is_own_comment(comment):
        return
    keyword = ctx.config.routing.trigger.execute_keyword
    before = ((ctx.payload.get("changes") or {}).get("body") or {}).get("from")
    if not (says_command(comment.get("body"), keyword) or says_command(before, keyword)):
        return
    item = _item_for(ctx)
    if item is None:
        return
    ctx.emit(
        "gate.edit_ignored",
        item.id,
        who=(comment.get("user") or {}).get("login"),
        comment_id=comment.get("id"),
        state=item.state,
        frozen=item.frozen is not None,
    )
