"""`/spawner/v1/pull-request`: a session's pull request. Called from inside a session with
its session token: `the-loop pr create` and `the-loop pr`. (A session's git goes through
the App's git gateway, `app.gitgate.git_gateway`, with that same token.)
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request
from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.api_guard import ApiError, guard, json_body, loop_state
from app.fleet.tokens import Principal, authenticate
from app.github import GitHubNotConfigured
from app.store import WorkItem
from app.workitems import lock_work_item, open_pull_request

bp = guard(Blueprint("pulls", __name__, url_prefix="/spawner/v1"))


def caller(session: Session, work_item_id: Any, *, lock: bool) -> tuple[Principal, WorkItem]:
    """Who calls, and the work item they name, which they must be allowed to act on."""
    principal = authenticate(
        session, request.headers.get("Authorization"), loop_state().services.clock()
    )
    if principal is None:
        raise ApiError(401, "a valid session token is required (Authorization: Bearer …)")
    if not isinstance(work_item_id, str) or not work_item_id:
        raise ApiError(400, "`work_item_id` is required")
    item = lock_work_item(session, work_item_id) if lock else session.get(WorkItem, work_item_id)
    if item is None:
        raise ApiError(404, f"no work item {work_item_id}")
    if not principal.may_act_on(item.id, item.repo_full_name):
        raise ApiError(403, f"this credential may not act on {item.id}")
    return principal, item


def _shown(item: WorkItem) -> dict[str, Any]:
    return {
        "work_item_id": item.id,
        "branch": item.branch or "",
        "status": item.state,
        "pull_request": dict(item.pull_request or {}) or None,
    }


@bp.get("/pull-request")
def linked() -> Response:
    """The work item's branch and linked pull request (null when none)."""
    state = loop_state()
    with state.sessions() as session:
        _principal, item = caller(session, request.args.get("work_item_id"), lock=False)
        return jsonify(_shown(item))


@bp.post("/pull-request")
def create() -> Response:
    """Open the session's pull request from its work branch."""
    state = loop_state()
    data = json_body()
    title, body = data.get("title"), data.get("body", "")
    if not isinstance(title, str) or not isinstance(body, str):
        raise ApiError(400, "`title` and `body` must be text")
    try:
        with state.sessions(expire_on_commit=False) as session, session.begin():
            _principal, item = caller(session, data.get("work_item_id"), lock=True)
            # A PullRequestRefused rolls this back and is answered by `app.fleet.api_guard`.
            open_pull_request(state.services, session, item, title, body)
            shown = _shown(item)
    except (GitHubException, GitHubNotConfigured) as exc:  # nothing was recorded
        raise ApiError(502, f"GitHub did not answer; try again: {exc}") from exc
    return jsonify(shown)
