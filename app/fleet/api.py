"""`/spawner/v1`: the HTTP API spawners (devbox agents) talk to. Outbound only from the
devbox: a spawner long-polls for jobs, so it needs no inbound port.

Every call carries `Authorization: Bearer <token>`: a spawner token, or — for `/comments`
only — a work item's session token. A spawner sees only the jobs of repositories it serves.
Errors are JSON `{"error": "…", "code": "…"}` with a status that says whose fault it is
(`app.fleet.api_guard`: one exception, one handler for every `/spawner/v1` blueprint).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.api_guard import ApiError, guard, json_body, loop_state
from app.fleet.comments import parse_request, post, reserve_post
from app.fleet.handover import (
    JobNotHeld,
    MintFailed,
    give_up,
    handover_failed,
    mint_clone_token,
    prepare_offer,
    revoke,
    take_token,
)
from app.fleet.liveness import note_seen, revive
from app.fleet.reports import ingest
from app.fleet.results import apply_result, send_receipt
from app.fleet.tokens import Principal, TokenError, authenticate, register, scope_of
from app.github import GitHubNotConfigured
from app.protocol import NOT_HELD
from app.store import Job, JobKind, JobState, Spawner, WorkItem, jobwake
from app.store import jobqueue as jobs
from app.workitems import has_room, held_repositories, lock_work_item, mark_held

log = logging.getLogger(__name__)

bp = guard(Blueprint("spawner", __name__, url_prefix="/spawner/v1"))

MAX_WAIT = 30.0
DEFAULT_WAIT = 25.0
LEASE_CONFIG = "THE_LOOP_JOB_LEASE_SECONDS"  # Flask config keys; tests change them
POLL_CONFIG = "THE_LOOP_JOB_POLL_SECONDS"


def _lease() -> timedelta:
    return timedelta(seconds=float(current_app.config.get(LEASE_CONFIG, jobs.LEASE.seconds)))


def _poll_interval(state: Any) -> float:
    return float(current_app.config.get(POLL_CONFIG) or jobwake.poll_interval(state.engine))


def _principal(session: Session) -> Principal:
    principal = authenticate(
        session, request.headers.get("Authorization"), loop_state().services.clock()
    )
    if principal is None:
        raise ApiError(401, "a valid spawner token is required (Authorization: Bearer …)")
    return principal


def _spawner(session: Session) -> Spawner:
    principal = _principal(session)
    if principal.spawner is None:
        raise ApiError(403, "this call needs a spawner token, not a session token")
    return principal.spawner


def _held_job(session: Session, job_id: int, spawner: Spawner) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise ApiError(404, f"no job {job_id}")
    if job.spawner_id != spawner.id:
        raise ApiError(409, f"job {job_id} is not held by this spawner", NOT_HELD)
    return job


@bp.post("/register")
def register_spawner() -> Response:
    data = json_body()
    repositories = data.get("repositories") or []
    harnesses = data.get("harnesses") or []
    if not isinstance(repositories, list) or not isinstance(harnesses, list):
        raise ApiError(400, "`repositories` and `harnesses` must be lists")
    state = loop_state()
    with state.sessions(expire_on_commit=False) as session, session.begin():
        spawner = _spawner(session)
        try:
            granted = register(
                session,
                spawner,
                repositories,
                harnesses,
                data.get("version"),
                state.services.clock(),
            )
        except TokenError as exc:
            raise ApiError(400, str(exc)) from exc
        state.services.events.emit(
            "spawner.registered",
            session=session,
            spawner=spawner.name,
            spawner_id=spawner.id,
            reported_name=str(data.get("name", ""))[:128],
            repositories=granted,
            harnesses=list(spawner.harnesses),
            version=spawner.version,
        )
    return jsonify(spawner_id=spawner.id, repositories=granted, harnesses=spawner.harnesses)


def _wait_seconds() -> float:
    raw = request.args.get("wait", str(DEFAULT_WAIT))
    try:
        wait = float(raw)
    except ValueError as exc:
        raise ApiError(400, f"wait must be a number of seconds, not {raw!r}") from exc
    return min(max(wait, 0.0), MAX_WAIT)


def _session_limit() -> int | None:
    """The spawner's `routing.maxSessions`, sent with each poll (absent: no limit)."""
    raw = request.args.get("max_sessions")
    if raw is None or raw == "":
        return None
    try:
        limit = int(raw)
    except ValueError as exc:
        raise ApiError(400, f"max_sessions must be a whole number, not {raw!r}") from exc
    if limit < 1:
        raise ApiError(400, f"max_sessions must be at least 1, not {limit}")
    return limit


@bp.get("/whoami")
def whoami() -> Response:
    """Who the token is and what it may serve (`the-loop doctor` checks a devbox with it)."""
    with loop_state().sessions() as session:
        spawner = _spawner(session)
        return jsonify(
            spawner_id=spawner.id,
            name=spawner.name,
            allowed=list(spawner.repositories or []),
            serves=list(spawner.serves) if spawner.serves is not None else None,
            harnesses=list(spawner.harnesses or []),
        )


@bp.get("/jobs")
def next_job() -> Response | tuple[str, int]:
    """Long-poll: the next job this spawner may run, or 204 after `wait` seconds (at once when
    the App is stopping: gunicorn would wait for the poll before it stops). A spawn is
    offered only while the spawner holds fewer sessions than its `max_sessions`; each look
    counts again, so a session that ends while the poll waits makes room within it."""
    state = loop_state()
    wait = _wait_seconds()
    limit = _session_limit()
    with state.sessions(expire_on_commit=False) as session, session.begin():
        spawner = _spawner(session)
        note_seen(state.services, session, spawner, state.services.clock())
    state.jobs.watch()  # jobs other replicas queue wake this poll too
    _give_up_expired(state)
    deadline = time.monotonic() + wait
    lease = _lease()
    while True:
        if state.jobs.closing:  # the App stops: the spawner asks the next one
            return "", 204
        seen = state.jobs.generation()
        job = _claim(state, spawner, lease, limit)
        if job is not None:
            return jsonify(job=job)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "", 204
        state.jobs.wait(seen, min(remaining, _poll_interval(state)), scope_of(spawner))


def _give_up_expired(state: Any) -> None:
    for failed in jobs.give_up_expired(state.sessions, state.services.clock()):
        give_up(state.services, state.sessions, failed)


def _claim(
    state: Any, spawner: Spawner, lease: timedelta, limit: int | None
) -> dict[str, Any] | None:
    """Claim the next job and hand it over in one transaction: a handover that fails rolls
    its claim back (the job is offered again at once, not when a lease runs out), says why
    in a `job.offer_failed` event, and the spawner is told to ask again."""
    now = state.services.clock()
    hosts = [str(h) for h in spawner.harnesses or []]
    with state.sessions() as session:
        room = has_room(session, spawner.id, limit)
        held = held_repositories(state.services.config, session, now) if room else []
    job_id: int | None = None
    spent: list[str | None] = []
    try:
        with state.sessions(expire_on_commit=False) as session, session.begin():
            while True:  # past spawns their items no longer want (`prepare_offer`)
                job = jobs.take_job(
                    session, spawner.id, scope_of(spawner), now, lease, hosts, room, held
                )
                if job is None:
                    break
                job_id = job.id
                offer = prepare_offer(state.services, session, job, spawner, lease)
                spent.append(offer.spent)
                if not offer.withdrawn:
                    if job.kind == JobKind.SPAWN:  # the line moved: what still holds it
                        mark_held(state.services.config, session, now)
                    break
    except Exception as exc:
        if job_id is None:
            raise
        log.warning("handing job %s to spawner %s failed: %s", job_id, spawner.name, exc)
        handover_failed(state.services, state.sessions, job_id, spawner, exc)
        raise ApiError(503, f"job {job_id} could not be handed over; ask again") from exc
    for token in spent:  # the tokens of earlier claims whose leases ran out
        revoke(state.services, token)
    return None if job is None else offer.to_json()


@bp.post("/heartbeat")
def spawner_heartbeat() -> Response:
    """The spawner is alive, and runs the sessions `sessions` names (work item ids): sent
    every few seconds (`THE_LOOP_SPAWNER_HEARTBEAT_SECONDS`). A lost session it names comes
    back to running; one silent past `THE_LOOP_SPAWNER_DEAD_SECONDS` is counted dead."""
    state = loop_state()
    reported = json_body().get("sessions") or []
    if not isinstance(reported, list):
        raise ApiError(400, "`sessions` must be a list of work item ids")
    with state.sessions() as session, session.begin():
        spawner = _spawner(session)
        note_seen(state.services, session, spawner, state.services.clock())
        back = revive(state.services, session, spawner, reported)
    return jsonify(ok=True, running_again=back)


@bp.post("/jobs/<int:job_id>/heartbeat")
def heartbeat(job_id: int) -> Response:
    state = loop_state()
    lease = _lease()
    with state.sessions() as session, session.begin():
        spawner = _spawner(session)
        _held_job(session, job_id, spawner)
        if not jobs.heartbeat(session, job_id, spawner.id, state.services.clock(), lease):
            raise ApiError(409, f"job {job_id} is no longer claimed by this spawner", NOT_HELD)
    return jsonify(ok=True, lease_seconds=int(lease.total_seconds()))


@bp.post("/jobs/<int:job_id>/token")
def job_token(job_id: int) -> Response:
    """A fresh installation token that can read the job's one repository, for a spawner that
    holds the job under a live lease and must clone for it (null without a GitHub identity).
    Asking again replaces (and revokes) the one handed out before; the job's end revokes it.
    A lapsed lease gets none: the job is offered again, maybe to another spawner already."""
    state = loop_state()
    with state.sessions(expire_on_commit=False) as session:
        spawner = _spawner(session)
        job = _held_job(session, job_id, spawner)
        if job.state != JobState.CLAIMED:
            raise ApiError(409, f"job {job_id} is no longer claimed by this spawner", NOT_HELD)
        if jobs.lease_lapsed(job, state.services.clock()):
            lapsed = f"job {job_id}'s lease lapsed: it is offered to spawners again"
            raise ApiError(409, lapsed, NOT_HELD)
        if job.kind not in (JobKind.SPAWN, JobKind.DELIVER):
            raise ApiError(409, f"a {job.kind} job clones nothing")
    try:
        token = mint_clone_token(state.services, state.sessions, job, spawner.id)
    except MintFailed as exc:
        raise ApiError(502, str(exc)) from exc
    except JobNotHeld as exc:
        raise ApiError(409, str(exc), NOT_HELD) from exc
    return jsonify(github_token=token)


def _report(data: dict[str, Any]) -> dict[str, Any]:
    result = data.get("result") or {}
    error = data.get("error")
    if not isinstance(data.get("ok"), bool):
        raise ApiError(400, "`ok` must be true or false")
    if not isinstance(result, dict) or not (error is None or isinstance(error, str)):
        raise ApiError(400, "`result` must be an object and `error` a string or null")
    return {"ok": data["ok"], "result": result, "error": error}


@bp.post("/jobs/<int:job_id>/result")
def job_result(job_id: int) -> Response:
    state = loop_state()
    report = _report(json_body())
    with state.sessions(expire_on_commit=False) as session, session.begin():
        spawner = _spawner(session)
        outcome, job = jobs.finish(session, job_id, spawner.id, report["ok"], report)
        if outcome == jobs.Finish.UNKNOWN or job is None:
            raise ApiError(404, f"no job {job_id}")
        if outcome == jobs.Finish.NOT_HELD:
            raise ApiError(
                409, f"job {job_id} is not held by this spawner (lease expired?)", NOT_HELD
            )
        spent = None
        if outcome == jobs.Finish.FINISHED:
            apply_result(state.services, session, job, spawner, report)
            spent = take_token(job)
    revoke(state.services, spent)
    delivered = job.kind == JobKind.DELIVER and report["result"].get("delivered")
    receipt = send_receipt(state.services, state.sessions, job) if delivered else None
    return jsonify(ok=True, repeat=outcome == jobs.Finish.REPEAT, receipt=receipt)


@bp.post("/events")
def report_events() -> Response:
    state = loop_state()
    events = json_body().get("events")
    if not isinstance(events, list):
        raise ApiError(400, "`events` must be a list")
    with state.sessions() as session, session.begin():
        spawner = _spawner(session)
        ingested = ingest(state.services, session, spawner, events)
    return jsonify(ingested.to_json())


@bp.post("/comments")
def agent_comment() -> Response:
    """A session's comment or question, posted on its issue while the item's post rate
    (`routing.sessionComments`) allows: the post is counted in one short transaction, with
    the item locked, and made in a second, so GitHub's answer holds no lock."""
    state = loop_state()
    comment = parse_request(json_body())
    rule = state.services.config.routing.session_comments
    with state.sessions() as session, session.begin():
        principal = _principal(session)
        item = lock_work_item(session, comment.work_item_id)
        if item is None:
            raise ApiError(404, f"no work item {comment.work_item_id}")
        if not principal.may_act_on(item.id, item.repo_full_name):
            raise ApiError(403, f"this credential may not post on {item.id}")
        refused = reserve_post(state.services, session, item, rule, time.time())
    if refused is not None:
        raise ApiError(429, refused, "too-many-posts")
    with state.sessions() as session, session.begin():
        item = session.get(WorkItem, comment.work_item_id)
        if item is None:
            raise ApiError(404, f"no work item {comment.work_item_id}")
        try:
            posted = post(state.services, session, item, comment, rule.allow_mentions)
        except (GitHubException, GitHubNotConfigured) as exc:
            raise ApiError(502, f"GitHub refused the comment: {exc}") from exc
    return jsonify(posted)
