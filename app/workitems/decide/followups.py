"""Follow-up comments: what a human says on a work item after its selection was frozen.

An authorized human comment (on the issue, or a reply in the item's Slack thread) becomes a
deliver job for the spawner hosting the item's session, which pastes it into the session or
respawns the session with it. Everything else said on a frozen item — comments by people
without permission, by bots, or carrying the App's own marker (the agent's own words) — is
recorded as `comment.ignored` and never reaches a session. Execute replies belong to the gate.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, Select, bindparam, or_, select
from sqlalchemy.orm import Session

from app.config import PullComments
from app.gate import addresses_the_app, is_own_comment, says_command
from app.github import HandlerContext, Services
from app.store import WorkItem
from app.workitems.decide.decisions import Decision, Outcome, Status
from app.workitems.flow.authz import refusal
from app.workitems.flow.jobs import deliver_job, enqueue
from app.workitems.flow.states import is_live


def deliver_key(source: str, ref: str) -> str:
    """The idempotency key of a follow-up: one deliver job per comment, however often seen."""
    return f"deliver:{ref}" if source == "github" else f"deliver:{source}:{ref}"


def deliver_comment(
    services: Services,
    session: Session,
    decision: Decision,
    *,
    gh_event: str | None = None,
    action: str | None = None,
) -> Outcome:
    """Queue an already-authorized comment for the item's session, once per `ref` (a
    `Decide`): QUEUED, REPEAT (already queued: a redelivery), NOT_LIVE (no session to
    deliver to: stopped, closed, parked) or NOT_A_WORK_ITEM.

    `gh_event`/`action` say what a GitHub follow-up was (default: an issue comment).
    Runs inside the caller's transaction; the spawner is woken when it commits.
    """
    author, ref, source = decision.author, decision.ref, decision.source
    item = session.get(WorkItem, decision.work_item_id)
    if item is None:
        return Outcome(Status.NOT_A_WORK_ITEM)
    if item.frozen is None or not is_live(item.state):
        record_ignored(
            services, session, item.id, f"work item is {item.state}", author, ref, source
        )
        return Outcome(Status.NOT_LIVE)
    payload = deliver_job(
        item,
        author=author,
        body=decision.body,
        ref=ref,
        source=source,
        comment_id=decision.comment_id,
        gh_event=gh_event,
        action=action,
    )
    key = deliver_key(source, ref)
    job = enqueue(services, session, key, payload, author=author, source=source, ref=ref)
    if job is None:
        return Outcome(Status.REPEAT)
    return Outcome(Status.QUEUED, job_id=job.id)


def record_ignored(
    services: Services,
    session: Session,
    work_item_id: str,
    reason: str,
    author: str,
    ref: str,
    source: str,
) -> None:
    """Something said on a work item that never reaches its session, and why."""
    services.events.emit(
        "comment.ignored",
        work_item_id,
        session=session,
        reason=reason,
        author=author,
        ref=ref,
        source=source,
    )


def _build_by_issue_or_pull() -> Select[Any]:
    """The item of an issue, else the one its pull request is linked to: one statement, built
    once — every comment on every issue asks, most of them about no work item."""
    number: BindParameter[int] = bindparam("number")
    return (
        select(WorkItem)
        .where(
            WorkItem.repo_full_name == bindparam("repo"),
            or_(WorkItem.issue_number == number, WorkItem.pull_number == number),
        )
        .order_by((WorkItem.issue_number == number).desc(), WorkItem.created_at)
        .limit(1)
    )


_BY_ISSUE_OR_PULL = _build_by_issue_or_pull()


def _frozen_item(session: Session, repo: str, number: int) -> WorkItem | None:
    """The executed item of issue `number`, or of the pull request `number` is linked to."""
    item = session.scalars(_BY_ISSUE_OR_PULL, {"repo": repo, "number": number}).first()
    return item if item is not None and item.frozen is not None else None


def on_issue_comment(ctx: HandlerContext) -> None:
    """`issue_comment.created`: deliver an authorized follow-up on a frozen work item."""
    comment: dict[str, Any] = ctx.payload.get("comment") or {}
    issue: dict[str, Any] = ctx.payload.get("issue") or {}
    repo = str((ctx.payload.get("repository") or {}).get("full_name", ""))
    body = str(comment.get("body") or "")
    if not repo or "id" not in comment or "number" not in issue:
        return
    if any(says_command(body, keyword) for keyword in ctx.config.routing.trigger.keywords):
        return  # a decision (execute, approve, changes) is never a plain follow-up
    item = _frozen_item(ctx.session, repo, int(issue["number"]))
    if item is None:
        return  # not a work item, or still at the human start gate (the gate's business)
    author = str((comment.get("user") or {}).get("login", ""))
    ref = str(comment["id"])
    services = ctx.services
    if is_own_comment(comment):
        record_ignored(
            services, ctx.session, item.id, "written by a bot or the App", author, ref, "github"
        )
        return
    if "pull_request" in issue and not speaks_to_session(ctx, body):
        record_ignored(services, ctx.session, item.id, NOT_ADDRESSED, author, ref, "github")
        return
    why = refusal(ctx.services, ctx.installation_id or item.installation_id, repo, author)
    if why is not None:
        record_ignored(services, ctx.session, item.id, why, author, ref, "github")
        return
    decision = Decision(item.id, author, body, ref, "github", comment_id=int(ref))
    deliver_comment(services, ctx.session, decision)


NOT_ADDRESSED = "does not mention the App (routing.pullComments: mention)"


def speaks_to_session(ctx: HandlerContext, body: str) -> bool:
    """May a comment on a work item's pull request reach its session? Always with
    `routing.pullComments: all`; with `mention`, only when it addresses the App (people
    discussing among themselves on the PR are not instructions)."""
    if ctx.config.routing.pull_comments is PullComments.ALL:
        return True
    leads = {"the-loop", *(k.split()[0] for k in ctx.config.routing.trigger.keywords if k.split())}
    return addresses_the_app(body, ctx.services.github.bot_login(), leads)
