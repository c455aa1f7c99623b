"""Pull-request sessions: the trigger label on a pull request the App did not open makes the
PR a work item of its own. The checklist goes on the PR, an execute there starts a session
checked out on the PR's head branch (the same gate, argv and authorization as an issue), and
comments, reviews and checks on the PR reach it.

A PR whose branch lives in a fork gets one clear reply and no session: the App's credential
can push only to the repository it is installed on.
"""

from __future__ import annotations

from typing import Any

from app.gate import MarkerKind, fork_reply, issue_of_branch, work_item_id_of
from app.github import HandlerContext, IssueIO
from app.store import WorkItem
from app.workitems.flow.handlers import start_work_item, stop_on_close
from app.workitems.prs.pulls import item_for_pull, pull_record


def _labelled_pull(ctx: HandlerContext) -> tuple[str, dict[str, Any]] | None:
    """(repo, PR) when the delivery adds the trigger label to a pull request."""
    label = str((ctx.payload.get("label") or {}).get("name") or "")
    if label.casefold() != ctx.config.routing.trigger.label.casefold():
        return None
    repo = (ctx.payload.get("repository") or {}).get("full_name")
    pr = ctx.payload.get("pull_request")
    if (
        not isinstance(repo, str)
        or not isinstance(pr, dict)
        or not isinstance(pr.get("number"), int)
    ):
        return None
    return repo, pr


def on_labeled(ctx: HandlerContext) -> None:
    """`pull_request.labeled` with the trigger label: start a work item on the PR itself."""
    found = _labelled_pull(ctx)
    if found is None:
        return
    repo, pr = found
    number = int(pr["number"])
    work_item_id = work_item_id_of(repo, number)
    head = pr.get("head") or {}
    linked = item_for_pull(ctx.session, repo, number)
    prefix = ctx.config.routing.pull_requests.branch_prefix
    if (linked is not None and linked.id != work_item_id) or (
        linked is None and issue_of_branch(prefix, str(head.get("ref") or "")) is not None
    ):
        reason = f"the pull request of {linked.id}" if linked else "opened from a work branch"
        ctx.emit("workitem.label_ignored", work_item_id, reason=reason)
        return
    head_repo = str((head.get("repo") or {}).get("full_name") or "")
    if head_repo.lower() != repo.lower():
        _refuse_fork(ctx, repo, number, head_repo)
        return
    start_work_item(ctx)
    item = ctx.session.get(WorkItem, work_item_id)
    if item is not None and item.pull_number is None:
        item.branch = str(head.get("ref") or "")
        item.pull_request = pull_record(pr, "labelled")
        item.pull_number = number


def _refuse_fork(ctx: HandlerContext, repo: str, number: int, head_repo: str) -> None:
    work_item_id = work_item_id_of(repo, number)
    ctx.emit("workitem.ignored", work_item_id, reason="fork", head_repo=head_repo)
    installation = ctx.installation_id
    if installation is None:
        return
    io = IssueIO(ctx.github, installation, repo, number)
    io.post_once(
        fork_reply(head_repo, repo, work_item_id),
        MarkerKind.NOTICE,
        item=work_item_id,
        event="fork",
    )


def close_unexecuted(ctx: HandlerContext) -> None:
    """`pull_request.closed` of a labelled PR never executed: it closes like an issue."""
    repo = (ctx.payload.get("repository") or {}).get("full_name")
    pr = ctx.payload.get("pull_request") or {}
    if not isinstance(repo, str) or not isinstance(pr.get("number"), int):
        return
    item = item_for_pull(ctx.session, repo, pr["number"])
    if item is not None and item.frozen is None and item.id == work_item_id_of(repo, pr["number"]):
        stop_on_close(ctx)
