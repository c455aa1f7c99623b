"""The jobs a work item sends its spawner, built in one place from the item's record.

Every job carries the item's frozen record (`frozen`), so a spawner that never ran the item
can still launch it on what the human chose, and a relaunch never takes its choice from the
agent-writable state file. `enqueue` stores the job once per key and records `job.queued`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.gate import frozen_skips, spec_id
from app.github import Services
from app.protocol import AllowJob, AnswerJob, DeliverJob, Frozen, JobPayload, SpawnJob, StopJob
from app.store import Job, JobKind, WorkItem, queue_job
from app.workitems.flow.capacity import renumber
from app.workitems.spend.spend_caps import mark_held


def _item_fields(item: WorkItem) -> dict[str, Any]:
    frozen = item.frozen or {}
    return {
        "work_item_id": item.id,
        "spec_id": spec_id(item.issue_number),
        "repo": item.repo_full_name,
        "issue_number": item.issue_number,
        "installation_id": item.installation_id,
        "clone_url": item.clone_url,
        "html_url": item.html_url,
        "frozen": Frozen.model_validate({**frozen, "skips": frozen_skips(frozen)}),
        "phase": item.phase or "",
        "gates": dict(item.gates or {}),
        "branch": item.branch or "",
    }


def spawn_job(item: WorkItem, *, title: str, prompt: str) -> SpawnJob:
    """Start the item's session on its frozen choice with `prompt`."""
    return SpawnJob(**_item_fields(item), title=title, prompt=prompt)


def deliver_job(
    item: WorkItem,
    *,
    author: str,
    body: str,
    ref: str,
    source: str,
    comment_id: int | None,
    gh_event: str | None = None,
    action: str | None = None,
) -> DeliverJob:
    """Hand a follow-up to the item's session. `gh_event` names what a GitHub follow-up was
    (an issue comment unless said otherwise: a review comment, a review, a check), which
    decides where its receipt goes."""
    from_github = source == "github"
    return DeliverJob(
        **_item_fields(item),
        author=author,
        body=body,
        ref=ref,
        source=source,
        comment_id=comment_id,
        gh_event=(gh_event or "issue_comment") if from_github else source,
        action=(action or "created") if from_github else "thread_reply",
    )


def stop_job(item: WorkItem, *, reason: str, note: str = "") -> StopJob:
    return StopJob(**_item_fields(item), reason=reason, note=note)


def answer_job(
    item: WorkItem,
    *,
    choice: int,
    option: str,
    fingerprint: str,
    author: str,
    source: str,
    ref: str,
) -> AnswerJob:
    """Pick option `choice` of the question the item's session shows (`fingerprint`)."""
    return AnswerJob(
        **_item_fields(item),
        choice=choice,
        option=option,
        fingerprint=fingerprint,
        author=author,
        source=source,
        ref=ref,
    )


def allow_job(
    item: WorkItem, *, host: str, port: int, author: str, source: str, ref: str
) -> AllowJob:
    """Let the item's live session's proxy through to `host:port`, for this item only."""
    return AllowJob(
        **_item_fields(item), host=host, port=port, author=author, source=source, ref=ref
    )


def enqueue(
    services: Services, session: Session, key: str, payload: JobPayload, **facts: Any
) -> Job | None:
    """Queue `payload` once per `key` in the caller's transaction; None for a repeat. A new
    spawn joins the line of items waiting for a session, saying so if a spend cap holds it."""
    job = queue_job(session, key, payload)
    if job is not None and payload.kind == JobKind.SPAWN:
        renumber(session)
        mark_held(services.config, session, services.clock())  # a spend cap may hold it
    if job is not None:
        services.events.emit(
            "job.queued",
            payload.work_item_id,
            session=session,
            kind=payload.kind,
            key=key,
            job=job.id,
            **facts,
        )
    return job
