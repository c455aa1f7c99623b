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

from flask import Blueprint, Response, jsonify, request
from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.api_guard import ApiError, BodyTooLarge, guard, json_body, json_object, loop_state
from app.fleet.tokens import authenticate
from app.github import GitHubNotConfigured
from app.graph import NODE_NAMES
from app.store import WorkItem
from app.workitems import KEY, advance, in_force, lock_work_item, move_count, next_attempt, walk_of

bp = guard(Blueprint("phase", __name__, url_prefix="/spawner/v1"))


def _describe(item: WorkItem) -> dict[str, Any]:
    walk = walk_of(item)
    return {
        "work_item_id": item.id,
        "phase": walk.pointer,
        "status": item.state,
        "skips": sorted(walk.skips),
        "decisions": dict(walk.decisions),
        "in_force": list(in_force(walk.skips)),
        "artifacts": list(item.artifacts or []),
    }


def _item(session: Session, work_item_id: Any) -> WorkItem:
    """The executed work item the caller names and may act on; raises ApiError."""
    principal = authenticate(
        session, request.headers.get("Authorization"), loop_state().services.clock()
    )
    if principal is None:
        raise ApiError(401, "a valid session token is required (Authorization: Bearer …)")
    if not isinstance(work_item_id, str) or not work_item_id:
        raise ApiError(400, "`work_item_id` is required")
    item = lock_work_item(session, work_item_id) if request.method == "POST" else None
    item = item or session.get(WorkItem, work_item_id)
    if item is None:
        raise ApiError(404, f"no work item {work_item_id}")
    if not principal.may_act_on(item.id, item.repo_full_name):
        raise ApiError(403, f"this credential may not act on {item.id}")
    if item.frozen is None:
        raise ApiError(409, f"{item.id} has not been executed yet")
    return item


@bp.get("/phase")
def where() -> Response:
    with loop_state().sessions() as session:
        return jsonify(_describe(_item(session, request.args.get("work_item_id"))))


@bp.post("/phase")
def move_on() -> Response:
    """A refused move (`MoveRefused`, `UnseenArtifacts`) answers through the door: 422, 409
    when stale, 425 when the spawner has not seen the artifacts yet."""
    state = loop_state()
    data = json_body()
    asked_from = data.get("from")
    artifacts = data.get("artifacts") or []
    if not isinstance(asked_from, str) or not isinstance(artifacts, list):
        raise ApiError(400, "`from` must be a node name and `artifacts` a list of file names")
    try:
        with state.sessions(expire_on_commit=False) as session, session.begin():
            item = _item(session, data.get("work_item_id"))
            previous = item.phase
            advance(state.services, session, item, asked_from, artifacts)
            described = _describe(item)
    except (GitHubException, GitHubNotConfigured) as exc:  # nothing was recorded
        raise ApiError(502, f"GitHub refused the review comment; try again: {exc}") from exc
    return jsonify({**described, "previous": previous})


@bp.post("/gate")
def gate_attempt() -> Response:
    """Count one attempt of the session's stop gate on `node`; answers `{"attempt": n}`."""
    state = loop_state()
    try:
        data = json_object()
    except BodyTooLarge as exc:
        raise ApiError(413, str(exc)) from exc
    node = (data or {}).get("node")
    if node not in NODE_NAMES:
        raise ApiError(400, "`node` must be a node of the process graph")
    with state.sessions() as session, session.begin():
        item = _item(session, (data or {}).get("work_item_id"))
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
        answer = {"work_item_id": item.id, "node": node, "attempt": attempt}
    return jsonify(answer)
