"""What the App does around a spawner's job: hand it over with its credentials, and record
what the spawner reports back (the session it started, the comment it delivered, the session
it stopped).

A job is handed over with a fresh installation token scoped to its one repository (spawn and
deliver jobs: a deliver may need to respawn and fetch) and a session token for the agent's
`the-loop comment` / `ask`. Status changes follow `next_status`, a pure rule: nothing that
has stopped or closed is ever shown as live again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from githubkit.exception import GitHubException
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.fleet.tokens import mint_session_token, revoke_session_tokens
from app.github.client import GitHubNotConfigured
from app.services import Services
from app.store.jobqueue import retarget
from app.store.tables import Job, JobKind, Once, Spawner, WorkItem, WorkItemStatus

log = logging.getLogger(__name__)

RECEIPT_REACTION: Final = "eyes"  # on a delivered comment: the session has it
S = WorkItemStatus
_ENDED = frozenset({S.STOPPED, S.CLOSED, S.UNLABELED, S.PARKED})

# (what happened) -> the status it leads to, from any status not in _ENDED
_OUTCOMES: dict[str, WorkItemStatus] = {
    "spawn.claimed": S.SPAWNING,
    "spawn.ok": S.RUNNING,
    "spawn.failed": S.EXITED,
    "deliver.respawned": S.RUNNING,
    "stop.ok": S.STOPPED,
    "session.spawned": S.RUNNING,
    "session.respawned": S.RUNNING,
    "session.stalled": S.STALLED,
    "session.unstalled": S.RUNNING,  # someone answered the prompt in tmux
    "session.exited": S.EXITED,
}
_FIRST_START = frozenset({"spawn.ok", "session.spawned"})


def next_status(current: str, happened: str) -> WorkItemStatus | None:
    """The work item's status after `happened`, or None to leave it as it is.

    A stop always lands (the issue closed); nothing else revives an ended item, and a
    spawn claim only moves an item that is waiting for it.
    """
    target = _OUTCOMES.get(happened)
    if target is None:
        return None
    if happened == "stop.ok":
        return None if current == S.CLOSED else target
    if current in _ENDED:
        return None
    if happened == "spawn.claimed" and current != S.FROZEN:
        return None
    if happened in _FIRST_START and current == S.STALLED:
        return None  # the watchdog already saw this new session wait on a prompt
    return target if target != current else None


def set_status(item: WorkItem | None, happened: str) -> None:
    if item is None:
        return
    status = next_status(item.state, happened)
    if status is not None:
        item.state = status


class OfferError(RuntimeError):
    """The App could not prepare a claimed job; it was handed back to the queue."""


@dataclass(frozen=True)
class Offer:
    """A claimed job as the spawner receives it."""

    job: Job
    lease: timedelta
    github_token: dict[str, str] | None
    session_token: str | None

    def to_json(self) -> dict[str, Any]:
        job = self.job
        return {
            "id": job.id,
            "kind": job.kind,
            "work_item": job.work_item,
            "repo": job.repo_full_name,
            "payload": job.payload,
            "lease_seconds": int(self.lease.total_seconds()),
            "github_token": self.github_token,
            "session_token": self.session_token,
        }


def _installation_of(engine: Engine, job: Job) -> int | None:
    raw = job.payload.get("installation_id")
    if isinstance(raw, int):
        return raw
    with Session(engine) as session:
        item = session.get(WorkItem, job.work_item)
        return item.installation_id if item is not None else None


def repository_token(services: Services, engine: Engine, job: Job) -> dict[str, str] | None:
    """A short-lived installation token for the job's one repository (None when the App has
    no GitHub identity configured, or does not know the installation)."""
    installation = _installation_of(engine, job)
    if installation is None or not services.github.configured:
        return None
    name = job.repo_full_name.split("/", 1)[-1]
    minted = services.github.repository_token(installation, name)
    return {"token": minted.token, "expires_at": minted.expires_at.isoformat()}


def prepare_offer(
    services: Services, engine: Engine, job: Job, spawner: Spawner, lease: timedelta
) -> Offer:
    """Credentials and bookkeeping for a job just claimed by `spawner`.

    Raises OfferError when a spawn job cannot get its repository token: a spawn without it
    could not fetch a private repository, so the job goes back to the queue instead.
    """
    github_token = None
    if job.kind in (JobKind.SPAWN, JobKind.DELIVER):
        try:
            github_token = repository_token(services, engine, job)
        except (GitHubException, GitHubNotConfigured) as exc:
            log.warning("installation token for %s failed: %s", job.repo_full_name, exc)
            if job.kind == JobKind.SPAWN:
                raise OfferError(f"could not mint an installation token: {exc}") from exc
    with Session(engine) as session, session.begin():
        session_token = None
        if job.kind in (JobKind.SPAWN, JobKind.DELIVER):
            session_token = mint_session_token(session, job.work_item)
        if job.kind == JobKind.SPAWN:
            set_status(session.get(WorkItem, job.work_item), "spawn.claimed")
        services.events.emit(
            "job.claimed",
            job.work_item,
            session=session,
            job=job.id,
            kind=job.kind,
            spawner=spawner.name,
            spawner_id=spawner.id,
            attempt=job.attempts,
        )
    return Offer(job=job, lease=lease, github_token=github_token, session_token=session_token)


def _session_facts(result: dict[str, Any], spawner: Spawner) -> dict[str, Any]:
    keys = (
        "session_id",
        "tmux_target",
        "harness",
        "model",
        "effort",
        "harness_args",
        "checkout",
        "respawned",
    )
    facts = {key: result.get(key) for key in keys if key in result}
    return {**facts, "spawner_id": spawner.id, "spawner": spawner.name}


@dataclass(frozen=True)
class _Outcome:
    """One finished job, as reported, with what it concerns."""

    services: Services
    session: Session
    job: Job
    spawner: Spawner
    item: WorkItem
    ok: bool
    result: dict[str, Any]
    error: str | None

    def mirror(self, payload: dict[str, Any]) -> None:
        _mirror(self.services, self.session, self.item, payload)


def apply_result(
    services: Services, session: Session, job: Job, spawner: Spawner, report: dict[str, Any]
) -> None:
    """Record a finished job's outcome on its work item (inside the caller's transaction)."""
    ok = bool(report.get("ok"))
    services.events.emit(
        "job.done" if ok else "job.failed",
        job.work_item,
        session=session,
        job=job.id,
        kind=job.kind,
        spawner=spawner.name,
        error=report.get("error"),
    )
    item = session.get(WorkItem, job.work_item)
    if item is None:
        return
    result = report.get("result") or {}
    outcome = _Outcome(services, session, job, spawner, item, ok, result, report.get("error"))
    if job.kind == JobKind.SPAWN:
        _spawned(outcome)
    elif job.kind == JobKind.DELIVER:
        _delivered(outcome)
    elif job.kind == JobKind.STOP and ok and result.get("stopped"):
        set_status(item, "stop.ok")
        revoke_session_tokens(session, job.work_item)


def _spawned(out: _Outcome) -> None:
    if not out.ok:
        set_status(out.item, "spawn.failed")
        out.mirror({"event": "session.spawn_failed", "error": out.error})
        return
    out.item.session = _session_facts(out.result, out.spawner)
    set_status(out.item, "spawn.ok")
    retarget(out.session, out.item.id, out.spawner.id)


def _delivered(out: _Outcome) -> None:
    payload, result, item = out.job.payload, out.result, out.item
    source = {"source": payload.get("source"), "ref": payload.get("ref")}
    if not out.ok or not result.get("delivered"):
        out.mirror({"event": "session.delivery_failed", "error": out.error, **source})
        return
    if result.get("respawned"):
        facts = {**(item.session or {}), "spawner_id": out.spawner.id, "spawner": out.spawner.name}
        if result.get("session_id"):
            facts["session_id"] = result["session_id"]
        item.session = {**facts, "respawned": True}
        set_status(item, "deliver.respawned")
        retarget(out.session, item.id, out.spawner.id)
    respawned = bool(result.get("respawned"))
    out.mirror(
        {
            "event": "session.delivered",
            "respawned": respawned,
            "comment_id": payload.get("comment_id"),
            **source,
        }
    )


def _mirror(services: Services, session: Session, item: WorkItem, payload: dict[str, Any]) -> None:
    services.mirror.post(session, item.id, "session", {**payload, "url": item.html_url})


def send_receipt(services: Services, engine: Engine, job: Job) -> bool:
    """React on the delivered GitHub comment, once per job; False when GitHub refused.

    Called after the result committed: a receipt that fails is logged and recorded, never
    allowed to undo the delivery.
    """
    payload = job.payload
    comment_id = payload.get("comment_id")
    if payload.get("source") != "github" or not isinstance(comment_id, int):
        return True
    key = f"receipt:{job.id}"
    with Session(engine) as session:
        if session.get(Once, key) is not None:
            return True
        item = session.get(WorkItem, job.work_item)
        installation = item.installation_id if item is not None else None
    if installation is None:
        return False
    owner, name = job.repo_full_name.split("/", 1)
    try:
        client = services.github.installation(installation)
        client.rest.reactions.create_for_issue_comment(
            owner, name, comment_id, content=RECEIPT_REACTION
        )
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("receipt on comment %s failed: %s", comment_id, exc)
        services.events.emit("receipt.failed", job.work_item, job=job.id, error=str(exc))
        return False
    with Session(engine) as session, session.begin():
        session.merge(Once(key=key, ref=str(comment_id)))
    return True
