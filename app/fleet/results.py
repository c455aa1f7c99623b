"""What the App records when a spawner reports a finished job: the session it started,
the comment it delivered, the answer it pressed, the session it stopped; and the 👀 receipt
on a delivered comment.
Status changes go through the lifecycle's one table (`app.workitems.flow.states`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.fleet.tokens import drop_job_token, keep_job_token, revoke_session_tokens
from app.gate import MarkerKind, defuse, marker, receipt_note
from app.github import GitHubNotConfigured, IssueIO, PullIO, Services
from app.protocol import AllowJob, AnswerJob, DeliverJob, parse_payload
from app.store import Job, JobKind, Once, Sessions, Spawner, WorkItem, retarget
from app.workitems import (
    CLOCK_KEYS,
    Happened,
    allow_done,
    lock_work_item,
    resume_after_stop,
    transition,
)

log = logging.getLogger(__name__)
MAX_FAILURE = 300  # characters of a failed launch's reason kept on the item

RECEIPT_REACTION: Final = "eyes"  # on a delivered comment: the session has it


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
        job.work_item_id,
        session=session,
        job=job.id,
        kind=job.kind,
        spawner=spawner.name,
        error=report.get("error"),
    )
    # Locked: a session event reported meanwhile (a set-up's failure) rewrites the same
    # record, and neither may write back what it read before the other committed.
    item = lock_work_item(session, job.work_item_id)
    if item is None:
        return
    result = report.get("result") or {}
    outcome = _Outcome(services, session, job, spawner, item, ok, result, report.get("error"))
    if job.kind == JobKind.SPAWN:
        _spawned(outcome)
    elif job.kind == JobKind.DELIVER:
        _delivered(outcome)
    elif job.kind == JobKind.ANSWER:
        _answered(outcome)
    elif job.kind == JobKind.ALLOW:
        payload = parse_payload(job.kind, job.payload)
        assert isinstance(payload, AllowJob)
        allow_done(services, session, item, payload, result if ok else {})
    elif job.kind == JobKind.STOP and ok and result.get("stopped"):
        transition(item, Happened.STOP_OK)
        revoke_session_tokens(session, job.work_item_id)
        resume_after_stop(services, session, item)  # its budget was raised meanwhile


def _spawned(out: _Outcome) -> None:
    if not out.ok:
        drop_job_token(out.session, out.job.id)
        transition(out.item, Happened.SPAWN_FAILED)
        # Kept on the item so the progress comment and the status page say why.
        why = (out.error or "the spawner gave no reason")[:MAX_FAILURE]
        out.item.session = {**(out.item.session or {}), "failure": why}
        out.mirror({"event": "session.spawn_failed", "error": out.error})
        return
    facts = _session_facts(out.result, out.spawner)
    before = out.item.session or {}
    # The launch event may have come first: how the session is confined is kept, and so is
    # what the spawner saw of the checkout (`session.evidence`), the repository's set-up,
    # and its sessions' clock.
    kept = {
        key: before[key] for key in ("sandbox", "evidence", "setup", *CLOCK_KEYS) if before.get(key)
    }
    out.item.session = {**facts, **kept}
    transition(out.item, Happened.SPAWN_OK)
    retarget(out.session, out.item.id, out.spawner.id)


def _delivered(out: _Outcome) -> None:
    payload, result, item = _deliver_payload(out.job), out.result, out.item
    source = {"source": payload.source, "ref": payload.ref}
    # The session the job relaunched keeps the job's token; one already running keeps its own.
    if out.ok and result.get("delivered") and result.get("respawned"):
        keep_job_token(out.session, item.id, out.job.id)
    else:
        drop_job_token(out.session, out.job.id)
    if not out.ok or not result.get("delivered"):
        out.mirror({"event": "session.delivery_failed", "error": out.error, **source})
        return
    if result.get("respawned"):
        facts = {**(item.session or {}), "spawner_id": out.spawner.id, "spawner": out.spawner.name}
        facts.pop("failure", None)  # it runs now
        if result.get("session_id"):
            facts["session_id"] = result["session_id"]
        item.session = {**facts, "respawned": True}
        transition(item, Happened.DELIVER_RESPAWNED)
        retarget(out.session, item.id, out.spawner.id)
    respawned = bool(result.get("respawned"))
    out.mirror(
        {
            "event": "session.delivered",
            "respawned": respawned,
            "comment_id": payload.comment_id,
            **source,
        }
    )


def answer_note(author: str, choice: int, option: str, why: str) -> str:
    """The line on the issue when an answer did not take (pure)."""
    who = f"@{author}, " if author else ""
    return f"{who}your answer {choice} ({option}) did not take: {why}."


def _answered(out: _Outcome) -> None:
    """An answer that was pressed and moved the screen is mirrored; one that was not sent,
    or left the screen where it was, is said on the issue to whoever answered."""
    payload = parse_payload(out.job.kind, out.job.payload)
    assert isinstance(payload, AnswerJob)
    fields = {"choice": payload.choice, "option": payload.option, "by": payload.author}
    if out.ok and out.result.get("moved"):
        out.mirror({"event": "session.answered", **fields})
        return
    why = (
        str(out.error or "no reason given")
        if not out.ok
        else "the keys were pressed but the screen still shows the question"
    )
    out.mirror({"event": "session.answer_failed", "error": why, **fields})
    item = out.item
    if item.installation_id is None:
        return
    io = IssueIO(out.services.github, item.installation_id, item.repo_full_name, item.issue_number)
    # The option is what the pane showed and `why` what the spawner saw: defused.
    text = defuse(answer_note(payload.author, payload.choice, payload.option, why.rstrip(".")))
    text += "\n\n" + marker(MarkerKind.NOTICE, item=item.id, answer=out.job.id) + "\n"
    try:
        io.post_once(text, MarkerKind.NOTICE, item=item.id, answer=out.job.id)
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("answer note on %s failed: %s", item.id, exc)


def _deliver_payload(job: Job) -> DeliverJob:
    payload = parse_payload(job.kind, job.payload)
    assert isinstance(payload, DeliverJob)
    return payload


def _mirror(services: Services, session: Session, item: WorkItem, payload: dict[str, Any]) -> None:
    services.mirror.post(session, item.id, "session", {**payload, "url": item.html_url})


def send_receipt(services: Services, sessions: Sessions, job: Job) -> bool:
    """React on the delivered GitHub comment, once per job; False when GitHub refused.

    Called after the result committed: a receipt that fails is logged and recorded, never
    allowed to undo the delivery.
    """
    payload = _deliver_payload(job)
    comment_id = payload.comment_id
    if payload.source != "github" or comment_id is None:
        return True
    key = f"receipt:{job.id}"
    with sessions() as session:
        if session.get(Once, key) is not None:
            return True
        item = session.get(WorkItem, job.work_item_id)
        installation = item.installation_id if item is not None else None
        pull = (item.pull_request or {}).get("number") if item is not None else None
    if installation is None:
        return False
    try:
        _acknowledge(services, installation, job.repo_full_name, payload, pull)
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("receipt on comment %s failed: %s", comment_id, exc)
        services.events.emit("receipt.failed", job.work_item_id, job=job.id, error=str(exc))
        return False
    with sessions() as session, session.begin():
        session.merge(Once(key=key, ref=str(comment_id)))
    return True


def _acknowledge(
    services: Services, installation: int, repo: str, payload: DeliverJob, pull: int | None
) -> None:
    """The receipt where the words were said: a reaction on the issue or review comment; a
    review (which takes no reactions) gets one line on its pull request."""
    assert payload.comment_id is not None
    if payload.gh_event == "pull_request_review_comment":
        PullIO(services.github, installation, repo).acknowledge_review_comment(payload.comment_id)
    elif payload.gh_event == "pull_request_review":
        if pull is None:
            return
        note = receipt_note(payload.author, payload.comment_id, payload.work_item_id)
        io = IssueIO(services.github, installation, repo, int(pull))
        io.post_once(note, MarkerKind.NOTICE, item=payload.work_item_id, review=payload.comment_id)
    else:
        owner, name = repo.split("/", 1)
        client = services.github.installation(installation)
        client.rest.reactions.create_for_issue_comment(
            owner, name, payload.comment_id, content=RECEIPT_REACTION
        )
