"""What happens on a work item's pull request reaches its session: review comments on lines,
submitted reviews, and failing checks on the PR's head commit. (Conversation comments on the
PR are issue comments; `followups.on_issue_comment` finds their item through the PR.)

Reviews and review comments follow the follow-up rule: only people the execute rule
authorizes reach the session; everyone else, and every bot, is recorded as
`comment.ignored`. With `routing.pullComments: mention` an approving or commenting review's
words reach it only when they address the App; line comments and "changes requested"
always do. Checks come from CI, not people: failing ones are delivered once per head
commit (`routing.pullRequests.deliverCheckFailures`).
"""

from __future__ import annotations

from typing import Any

from githubkit.exception import GitHubException

from app.gate import (
    FAILING_CONCLUSIONS,
    CheckFailure,
    checks_text,
    is_own_comment,
    review_comment_text,
    review_text,
)
from app.github import GitHubNotConfigured, HandlerContext, PullIO, check_failure
from app.store import WorkItem
from app.workitems.decide.decisions import Decision
from app.workitems.decide.followups import (
    NOT_ADDRESSED,
    deliver_comment,
    record_ignored,
    speaks_to_session,
)
from app.workitems.flow.authz import refusal
from app.workitems.prs.pulls import item_for_branch, item_for_pull

REVIEW_STATES = frozenset({"approved", "changes_requested", "commented"})


def _repo(ctx: HandlerContext) -> str:
    return str((ctx.payload.get("repository") or {}).get("full_name") or "")


def _item_of_pull(ctx: HandlerContext) -> tuple[WorkItem, int] | None:
    """The executed work item of the delivery's pull request, and the PR's number."""
    pr = ctx.payload.get("pull_request") or {}
    repo = _repo(ctx)
    if not repo or not isinstance(pr.get("number"), int):
        return None
    item = item_for_pull(ctx.session, repo, pr["number"])
    if item is None or item.frozen is None:
        return None
    return item, pr["number"]


def _admitted(ctx: HandlerContext, item: WorkItem, said: dict[str, Any], ref: str) -> str | None:
    """The author's login when their words may reach the session; else records why not."""
    author = str((said.get("user") or {}).get("login") or "")
    if is_own_comment(said):
        reason = "written by a bot or the App"
    else:
        installation = ctx.installation_id or item.installation_id
        reason = refusal(ctx.services, installation, item.repo_full_name, author) or ""
    if reason:
        record_ignored(ctx.services, ctx.session, item.id, reason, author, ref, "github")
        return None
    return author


def on_review_comment(ctx: HandlerContext) -> None:
    """`pull_request_review_comment.created`: a comment on a line of the diff."""
    found = _item_of_pull(ctx)
    comment = ctx.payload.get("comment") or {}
    if found is None or not isinstance(comment.get("id"), int):
        return
    item, number = found
    ref = f"review-comment:{comment['id']}"
    author = _admitted(ctx, item, comment, ref)
    if author is None:
        return
    text = review_comment_text(
        number,
        path=str(comment.get("path") or ""),
        line=comment.get("line") or comment.get("original_line"),
        start_line=comment.get("start_line") or comment.get("original_start_line"),
        diff_hunk=str(comment.get("diff_hunk") or ""),
        body=str(comment.get("body") or ""),
    )
    deliver_comment(
        ctx.services,
        ctx.session,
        Decision(item.id, author, text, ref, "github", comment_id=comment["id"]),
        gh_event="pull_request_review_comment",
    )


def on_review(ctx: HandlerContext) -> None:
    """`pull_request_review.submitted`: the verdict and its words. A bare "commented" review
    says nothing of its own (its line comments arrive as their own deliveries)."""
    found = _item_of_pull(ctx)
    review = ctx.payload.get("review") or {}
    state = str(review.get("state") or "").lower()
    body = str(review.get("body") or "")
    if found is None or not isinstance(review.get("id"), int) or state not in REVIEW_STATES:
        return
    if state == "commented" and not body.strip():
        return
    item, number = found
    ref = f"review:{review['id']}"
    if state != "changes_requested" and not speaks_to_session(ctx, body):
        login = str((review.get("user") or {}).get("login") or "")
        record_ignored(ctx.services, ctx.session, item.id, NOT_ADDRESSED, login, ref, "github")
        return
    author = _admitted(ctx, item, review, ref)
    if author is None:
        return
    words = review_text(number, state, body)
    deliver_comment(
        ctx.services,
        ctx.session,
        Decision(item.id, author, words, ref, "github", comment_id=review["id"]),
        gh_event="pull_request_review",
        action="submitted",
    )


def on_check_run(ctx: HandlerContext) -> None:
    """`check_run.completed` with a failing conclusion."""
    run = ctx.payload.get("check_run") or {}
    if run.get("conclusion") not in FAILING_CONCLUSIONS:
        return
    suite = run.get("check_suite") or {}
    _deliver_failures(
        ctx,
        sha=str(run.get("head_sha") or ""),
        pulls=run.get("pull_requests") or [],
        branch=str(suite.get("head_branch") or ""),
        fallback=[check_failure(run)],
        app=run.get("app") or {},
    )


def on_check_suite(ctx: HandlerContext) -> None:
    """`check_suite.completed` with a failing conclusion (its runs are asked of GitHub)."""
    suite = ctx.payload.get("check_suite") or {}
    conclusion = suite.get("conclusion")
    if conclusion not in FAILING_CONCLUSIONS:
        return
    sha = str(suite.get("head_sha") or "")
    app = suite.get("app") or {}
    web = str((ctx.payload.get("repository") or {}).get("html_url") or "")
    whole = CheckFailure(
        name=str(app.get("name") or "a check suite"),
        conclusion=str(conclusion),
        url=f"{web}/commit/{sha}/checks" if web and sha else "",
    )
    _deliver_failures(
        ctx,
        sha=sha,
        pulls=suite.get("pull_requests") or [],
        branch=str(suite.get("head_branch") or ""),
        fallback=[whole],
        app=app,
    )


def _check_item(
    ctx: HandlerContext, pulls: list[Any], branch: str
) -> tuple[WorkItem, dict[str, Any]] | None:
    """The executed item whose linked pull request the checks ran for."""
    repo = _repo(ctx)
    numbers = [p.get("number") for p in pulls if isinstance(p, dict)]
    candidates = [item_for_pull(ctx.session, repo, n) for n in numbers if isinstance(n, int)]
    if branch:  # a PR from another repository is not listed in `pull_requests`
        candidates.append(item_for_branch(ctx.session, repo, branch))
    for item in candidates:
        pr = (item.pull_request or {}) if item is not None else {}
        if item is not None and item.frozen is not None and pr.get("number"):
            return item, pr
    return None


def _deliver_failures(
    ctx: HandlerContext,
    *,
    sha: str,
    pulls: list[Any],
    branch: str,
    fallback: list[CheckFailure],
    app: dict[str, Any],
) -> None:
    if not ctx.config.routing.pull_requests.deliver_check_failures or not sha:
        return
    found = _check_item(ctx, pulls, branch)
    if found is None:
        return
    item, pr = found
    if pr.get("head_sha") and pr["head_sha"] != sha:
        ctx.emit("checks.ignored", item.id, sha=sha, reason="not the pull request's head commit")
        return
    failures = _failing(ctx, item, sha) or fallback
    checker = str(app.get("slug") or app.get("name") or "checks")
    words = checks_text(int(pr["number"]), sha, failures)
    ref = f"checks:{item.repo_full_name}@{sha}"
    deliver_comment(
        ctx.services,
        ctx.session,
        Decision(item.id, checker, words, ref, "github"),
        gh_event=ctx.event,
        action="completed",
    )


def _failing(ctx: HandlerContext, item: WorkItem, sha: str) -> list[CheckFailure]:
    """Every failing check on `sha` as GitHub lists it now; [] when it cannot be asked."""
    if item.installation_id is None:
        return []
    try:
        return PullIO(ctx.github, item.installation_id, item.repo_full_name).failing_checks(sha)
    except (GitHubException, GitHubNotConfigured) as exc:
        ctx.emit("checks.list_failed", item.id, sha=sha, error=str(exc)[:300])
        return []
