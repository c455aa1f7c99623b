"""Handing a claimed job to its spawner: the credentials it needs, and the bookkeeping.

A spawn or deliver job goes out with a fresh installation token scoped to its one repository
(a deliver may need to respawn and fetch) and a session token for the agent's
`the-loop comment` / `ask`. A spawn whose token cannot be minted goes back to the queue:
without it a private repository could not be fetched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from githubkit.exception import GitHubException
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.fleet.tokens import mint_session_token
from app.github.client import GitHubNotConfigured
from app.services import Services
from app.store.tables import Job, JobKind, Spawner, WorkItem
from app.workitems.states import Happened, transition

log = logging.getLogger(__name__)


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
    """The installation the job's work item belongs to (the App's record, not the payload)."""
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
    # Fetching is all a spawner does with it; a push asks for its own (`git_access`).
    minted = services.github.repository_token(installation, name, {"contents": "read"})
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
            transition(session.get(WorkItem, job.work_item), Happened.SPAWN_CLAIMED)
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
