"""A work item's pull request: opened by its session through the App, or by hand from its
work branch; kept current from `pull_request.*` deliveries; merged → the item is done;
closed unmerged → the session stops and the item waits for a human.

The item records the PR (`pull_request`, and `pull_number` to find the item again from any
PR event). Every GitHub write is found-or-posted through a marker, and every handler runs in
its delivery's transaction with the item locked, so a redelivery changes nothing twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.gate import (
    MAX_PULL_BODY,
    MarkerKind,
    closed_notice,
    is_marked,
    issue_of_branch,
    opened_line,
    pull_body,
    reopened_text,
    work_item_id_of,
)
from app.github import HandlerContext, IssueIO, PullIO, PullRefused, Services
from app.store import WorkItem
from app.workitems.decide.advance import complete
from app.workitems.decide.decisions import lock_work_item
from app.workitems.flow.jobs import deliver_job, enqueue, stop_job
from app.workitems.flow.states import Happened, is_live, transition
from app.workitems.workitem_errors import WorkItemError

MAX_TITLE = 256


class PullRequestRefused(WorkItemError):
    """A session's `pr create` cannot be done; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_BY_PULL = (
    select(WorkItem)
    .where(
        WorkItem.repo_full_name == bindparam("repo"), WorkItem.pull_number == bindparam("number")
    )
    .order_by(WorkItem.created_at)
)


def item_for_pull(session: Session, repo: str, number: int) -> WorkItem | None:
    """The work item pull request `number` of `repo` is linked to (or is), if any."""
    return session.scalars(_BY_PULL, {"repo": repo, "number": number}).first()


def item_for_branch(session: Session, repo: str, branch: str) -> WorkItem | None:
    """The work item whose session works on `branch` of `repo`, if any."""
    query = select(WorkItem).where(WorkItem.repo_full_name == repo, WorkItem.branch == branch)
    return session.scalars(query.order_by(WorkItem.created_at)).first()


def pull_record(pr: dict[str, Any], by: str) -> dict[str, Any]:
    """What the item keeps of a GitHub pull request object (REST or webhook shape)."""
    head = pr.get("head") or {}
    base = pr.get("base") or {}
    return {
        "number": int(pr["number"]),
        "html_url": str(pr.get("html_url") or ""),
        "title": str(pr.get("title") or ""),
        "head": str(head.get("ref") or ""),
        "base": str(base.get("ref") or ""),
        "head_sha": str(head.get("sha") or ""),
        "merged": bool(pr.get("merged")),
        "closed": pr.get("state") == "closed",
        "by": by,
    }


def is_open(item: WorkItem) -> bool:
    """The item is linked to a pull request that is still open."""
    pr = item.pull_request or {}
    return bool(pr.get("number")) and not pr.get("closed")


def _update(item: WorkItem, **changes: Any) -> dict[str, Any]:
    """Replace the record (a new dict, so the change is flushed and shown)."""
    item.pull_request = {**(item.pull_request or {}), **changes}
    return item.pull_request


def link(
    services: Services, session: Session, item: WorkItem, pr: dict[str, Any], *, by: str
) -> None:
    """Record `pr` as the item's pull request; say so once on the issue and in Slack."""
    record = pull_record(pr, by)
    again = item.pull_number == record["number"]
    item.pull_request = {**record, "by": (item.pull_request or {}).get("by", by) if again else by}
    item.pull_number = record["number"]
    if again:
        return
    services.events.emit(
        "pull_request.linked",
        item.id,
        session=session,
        number=record["number"],
        html_url=record["html_url"],
        head=record["head"],
        base=record["base"],
        by=by,
    )
    if item.installation_id is not None:
        io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
        text = opened_line(record["number"], record["html_url"], by, item.id)
        io.post_once(text, MarkerKind.NOTICE, item=item.id, pr=record["number"], event="opened")
    services.mirror.post(
        session,
        item.id,
        "pull_request",
        {"event": "opened", **record, "url": item.html_url},
    )


def open_pull_request(
    services: Services, session: Session, item: WorkItem, title: str, body: str
) -> dict[str, Any]:
    """A session's `pr create`: open the PR from its work branch to the base the execute
    named (`base:<branch>`, else the default branch), with "Closes #n" and the App's marker;
    returns the recorded PR (raises PullRequestRefused)."""
    title = title.strip()
    if not title or len(title) > MAX_TITLE:
        raise PullRequestRefused(400, f"the title must be 1 to {MAX_TITLE} characters")
    if len(body) > MAX_PULL_BODY:
        raise PullRequestRefused(400, f"the body is longer than {MAX_PULL_BODY} characters")
    if is_open(item):
        pr = item.pull_request or {}
        raise PullRequestRefused(
            409, f"pull request #{pr['number']} is already open for {item.id}: {pr['html_url']}"
        )
    if item.installation_id is None or not item.branch:
        raise PullRequestRefused(409, f"{item.id} has no work branch or installation recorded")
    if not is_live(item.state):
        raise PullRequestRefused(409, f"{item.id} is {item.state}: it has no live session")
    io = PullIO(services.github, item.installation_id, item.repo_full_name)
    base = str((item.frozen or {}).get("base") or "") or io.default_branch()
    mentions = services.config.routing.session_comments.allow_mentions
    text = pull_body(body, item.issue_number, item.id, mentions)
    try:
        created = io.create(title=title, head=item.branch, base=base, body=text)
    except PullRefused as exc:
        raise PullRequestRefused(
            422,
            f"GitHub did not open it: {exc}. Commit on `{item.branch}` and push it first "
            f"(git push -u origin {item.branch}).",
        ) from exc
    link(services, session, item, created, by="session")
    return dict(item.pull_request or {})


# --- pull_request.* deliveries ----------------------------------------------------------------


def _pull(ctx: HandlerContext) -> tuple[str, dict[str, Any]] | None:
    repo = (ctx.payload.get("repository") or {}).get("full_name")
    pr = ctx.payload.get("pull_request")
    if not isinstance(repo, str) or not isinstance(pr, dict) or "number" not in pr:
        return None
    return repo, pr


def _locked_item(ctx: HandlerContext, repo: str, number: int) -> WorkItem | None:
    found = item_for_pull(ctx.session, repo, number)
    return lock_work_item(ctx.session, found.id) if found is not None else None


def _sender(ctx: HandlerContext) -> str:
    return str((ctx.payload.get("sender") or {}).get("login") or "someone")


def link_opened(ctx: HandlerContext) -> None:
    """`pull_request.opened`: a PR from a work branch (by the session or by hand) is linked
    to its item."""
    found = _pull(ctx)
    if found is None:
        return
    repo, pr = found
    head = pr.get("head") or {}
    head_repo = str((head.get("repo") or {}).get("full_name") or "")
    prefix = ctx.config.routing.pull_requests.branch_prefix
    number = issue_of_branch(prefix, str(head.get("ref") or ""))
    if number is None or head_repo.lower() != repo.lower():
        return  # not a work branch of this repository
    item = lock_work_item(ctx.session, work_item_id_of(repo, number))
    if item is None or item.frozen is None:
        ctx.emit("pull_request.link_ignored", work_item_id_of(repo, number), reason="no-work-item")
        return
    if is_open(item) and item.pull_number != pr["number"]:
        ctx.emit(
            "pull_request.link_ignored",
            item.id,
            number=pr["number"],
            reason=f"already linked to #{item.pull_number}",
        )
        return
    ours = is_marked(pr.get("body"), MarkerKind.PULL, item=item.id)
    by = "session" if ours else str((pr.get("user") or {}).get("login") or "someone")
    link(ctx.services, ctx.session, item, pr, by=by)


def on_synchronize(ctx: HandlerContext) -> None:
    """`pull_request.synchronize`: new commits; checks are judged against the new head."""
    found = _pull(ctx)
    if found is None:
        return
    repo, pr = found
    item = _locked_item(ctx, repo, int(pr["number"]))
    if item is not None:
        _update(item, head_sha=str((pr.get("head") or {}).get("sha") or ""))


def on_closed(ctx: HandlerContext) -> None:
    """`pull_request.closed`: merged → the item is done; closed unmerged → its session stops
    and the item waits for a human (reopen, or a new execute)."""
    found = _pull(ctx)
    if found is None:
        return
    repo, pr = found
    item = _locked_item(ctx, repo, int(pr["number"]))
    if item is None or item.frozen is None:
        return  # a labelled PR never executed closes like an issue (`pull_sessions`)
    merged = bool(pr.get("merged"))
    record = _update(item, merged=merged, closed=True)
    ctx.emit(
        "pull_request.merged" if merged else "pull_request.closed",
        item.id,
        number=record["number"],
        by=_sender(ctx),
        state=item.state,
    )
    if merged:
        reason = f"pull request #{record['number']} merged"
        complete(ctx.services, ctx.session, item, reason=reason, happened=Happened.PR_MERGED)
    elif is_live(item.state):
        _wait_for_a_human(ctx, item, record)


def _wait_for_a_human(ctx: HandlerContext, item: WorkItem, record: dict[str, Any]) -> None:
    enqueue(
        ctx.services,
        ctx.session,
        f"stop-pr:{ctx.delivery_id}",
        stop_job(item, reason="pull-request-closed"),
    )
    transition(item, Happened.PR_CLOSED)
    number, by = int(record["number"]), _sender(ctx)
    if item.installation_id is not None:
        io = IssueIO(ctx.github, item.installation_id, item.repo_full_name, item.issue_number)
        keyword = ctx.config.routing.trigger.execute_keyword
        text = closed_notice(number, by, keyword, item.id, ctx.delivery_id)
        io.post_once(
            text, MarkerKind.NOTICE, item=item.id, pr=number, event="closed", ref=ctx.delivery_id
        )
    ctx.mirror.post(
        ctx.session,
        item.id,
        "pull_request",
        {"event": "closed", **record, "by": by, "url": item.html_url},
    )


def on_reopened(ctx: HandlerContext) -> None:
    """`pull_request.reopened`: the item goes on; a follow-up relaunches its session."""
    found = _pull(ctx)
    if found is None:
        return
    repo, pr = found
    item = _locked_item(ctx, repo, int(pr["number"]))
    if item is None:
        return
    record = _update(item, closed=False, merged=False)
    if transition(item, Happened.PR_REOPENED) is None:
        return
    by = _sender(ctx)
    ctx.emit("pull_request.reopened", item.id, number=record["number"], by=by)
    notice = deliver_job(
        item,
        author=by,
        body=reopened_text(int(record["number"]), by),
        ref=f"reopened:{ctx.delivery_id}",
        source="app",
        comment_id=None,
    )
    enqueue(ctx.services, ctx.session, f"deliver:app:reopened:{ctx.delivery_id}", notice)
