"""`/spawner/v1/pull-request`: a session's pull request. Called from inside a session with
its session token: `the-loop pr create` and `the-loop pr`. (A session's git goes through
the App's git gateway, `app.fleet.git_gateway`, with that same token.)
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.api_guard import BodyTooLarge, credential_first, json_object
from app.fleet.tokens import Principal, authenticate
from app.github.client import GitHubNotConfigured
from app.store.tables import WorkItem
from app.workitems.decisions import lock_work_item
from app.workitems.pulls import PullRequestRefused, open_pull_request

bp = Blueprint("pulls", __name__, url_prefix="/spawner/v1")
bp.before_request(credential_first)


class _Failed(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@bp.errorhandler(_Failed)
def _failed(exc: _Failed) -> tuple[Response, int]:
    return jsonify(error=str(exc)), exc.status


def _state() -> Any:
    return current_app.extensions["the-loop"]


def _body() -> dict[str, Any]:
    try:
        data = json_object()
    except BodyTooLarge as exc:
        raise _Failed(413, str(exc)) from exc
    if data is None:
        raise _Failed(400, "the body must be a JSON object")
    return data


def _caller(session: Session, work_item: Any, *, lock: bool) -> tuple[Principal, WorkItem]:
    """Who calls, and the work item they name, which they must be allowed to act on."""
    principal = authenticate(
        session, request.headers.get("Authorization"), _state().services.clock()
    )
    if principal is None:
        raise _Failed(401, "a valid session token is required (Authorization: Bearer …)")
    if not isinstance(work_item, str) or not work_item:
        raise _Failed(400, "`work_item` is required")
    item = lock_work_item(session, work_item) if lock else session.get(WorkItem, work_item)
    if item is None:
        raise _Failed(404, f"no work item {work_item}")
    if not principal.may_act_on(item.id, item.repo_full_name):
        raise _Failed(403, f"this credential may not act on {item.id}")
    return principal, item


def _shown(item: WorkItem) -> dict[str, Any]:
    return {
        "work_item": item.id,
        "branch": item.branch or "",
        "status": item.state,
        "pull_request": dict(item.pull_request or {}) or None,
    }


@bp.get("/pull-request")
def linked() -> Response:
    """The work item's branch and linked pull request (null when none)."""
    state = _state()
    with Session(state.engine) as session:
        _principal, item = _caller(session, request.args.get("work_item"), lock=False)
        return jsonify(_shown(item))


@bp.post("/pull-request")
def create() -> Response:
    """Open the session's pull request from its work branch."""
    state = _state()
    data = _body()
    title, body = data.get("title"), data.get("body", "")
    if not isinstance(title, str) or not isinstance(body, str):
        raise _Failed(400, "`title` and `body` must be text")
    try:
        with Session(state.engine, expire_on_commit=False) as session, session.begin():
            _principal, item = _caller(session, data.get("work_item"), lock=True)
            try:
                open_pull_request(state.services, session, item, title, body)
            except PullRequestRefused as exc:
                raise _Failed(exc.status, str(exc)) from exc
            shown = _shown(item)
    except (GitHubException, GitHubNotConfigured) as exc:  # nothing was recorded
        raise _Failed(502, f"GitHub did not answer; try again: {exc}") from exc
    return jsonify(shown)
