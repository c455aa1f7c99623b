"""`/spawner/v1/phase`: where a work item stands, and a session's request to move on.

Called by `the-loop phase` / `the-loop phase next` inside a session, with that item's
session token (a spawner token serving the repository works too). The App's record is the
authority: a refused move answers 422 with the one line the agent is told, a move asked
from a position the App does not hold answers 409, and a move whose artifacts the item's
spawner has not seen on the host (yet) answers 425: `phase next` asks again after the
spawner's next look.

`/spawner/v1/gate` is where a session's stop gate asks which attempt it is at on a node
that blocks: the count lives on the work item (`workitems.gate_counts`), never in the
session's own files.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.api_guard import BodyTooLarge, credential_first, json_object
from app.fleet.tokens import authenticate
from app.github.client import GitHubNotConfigured
from app.graph import NODE_NAMES
from app.store.tables import WorkItem
from app.workitems.advance import UnseenArtifacts, advance, move_count, walk_of
from app.workitems.decisions import lock_work_item
from app.workitems.gate_counts import KEY, next_attempt
from app.workitems.walk import MoveRefused, in_force

bp = Blueprint("phase", __name__, url_prefix="/spawner/v1")
bp.before_request(credential_first)


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify(error=message), status


def _describe(item: WorkItem) -> dict[str, Any]:
    walk = walk_of(item)
    return {
        "work_item": item.id,
        "phase": walk.pointer,
        "status": item.state,
        "skips": sorted(walk.skips),
        "decisions": dict(walk.decisions),
        "in_force": list(in_force(walk.skips)),
        "artifacts": list(item.artifacts or []),
    }


def _item(session: Session, work_item: Any) -> tuple[WorkItem | None, tuple[Response, int] | None]:
    state = current_app.extensions["the-loop"]
    principal = authenticate(session, request.headers.get("Authorization"), state.services.clock())
    if principal is None:
        return None, _error(401, "a valid session token is required (Authorization: Bearer …)")
    if not isinstance(work_item, str) or not work_item:
        return None, _error(400, "`work_item` is required")
    item = lock_work_item(session, work_item) if request.method == "POST" else None
    item = item or session.get(WorkItem, work_item)
    if item is None:
        return None, _error(404, f"no work item {work_item}")
    if not principal.may_act_on(item.id, item.repo_full_name):
        return None, _error(403, f"this credential may not act on {item.id}")
    if item.frozen is None:
        return None, _error(409, f"{item.id} has not been executed yet")
    return item, None


@bp.get("/phase")
def where() -> Response | tuple[Response, int]:
    state = current_app.extensions["the-loop"]
    with Session(state.engine) as session:
        item, failed = _item(session, request.args.get("work_item"))
        if failed is not None:
            return failed
        assert item is not None
        return jsonify(_describe(item))


@bp.post("/phase")
def move_on() -> Response | tuple[Response, int]:
    state = current_app.extensions["the-loop"]
    try:
        data = json_object()
    except BodyTooLarge as exc:
        return _error(413, str(exc))
    if data is None:
        return _error(400, "the body must be a JSON object")
    asked_from = data.get("from")
    artifacts = data.get("artifacts") or []
    if not isinstance(asked_from, str) or not isinstance(artifacts, list):
        return _error(400, "`from` must be a node name and `artifacts` a list of file names")
    try:
        with Session(state.engine, expire_on_commit=False) as session, session.begin():
            item, failed = _item(session, data.get("work_item"))
            if failed is not None:
                return failed
            assert item is not None
            previous = item.phase
            try:
                advance(state.services, session, item, asked_from, artifacts)
            except UnseenArtifacts as exc:
                return _error(425, str(exc))
            except MoveRefused as exc:
                return _error(409 if exc.stale else 422, str(exc))
            described = _describe(item)
    except (GitHubException, GitHubNotConfigured) as exc:  # nothing was recorded
        return _error(502, f"GitHub refused the review comment; try again: {exc}")
    return jsonify({**described, "previous": previous})


@bp.post("/gate")
def gate_attempt() -> Response | tuple[Response, int]:
    """Count one attempt of the session's stop gate on `node`; answers `{"attempt": n}`."""
    state = current_app.extensions["the-loop"]
    try:
        data = json_object()
    except BodyTooLarge as exc:
        return _error(413, str(exc))
    node = (data or {}).get("node")
    if node not in NODE_NAMES:
        return _error(400, "`node` must be a node of the process graph")
    with Session(state.engine) as session, session.begin():
        item, failed = _item(session, (data or {}).get("work_item"))
        if failed is not None:
            return failed
        assert item is not None
        facts = dict(item.session or {})
        attempt, kept = next_attempt(
            facts.get(KEY),
            move_count(session, item),
            str(node),
            state.services.clock(),
            state.settings.the_loop_gate_attempt_gap,
        )
        if kept != facts.get(KEY):
            item.session = {**facts, KEY: kept}
        answer = {"work_item": item.id, "node": node, "attempt": attempt}
    return jsonify(answer)
