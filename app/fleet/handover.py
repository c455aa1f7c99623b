"""Handing a claimed job to its spawner: the credentials it needs, and the bookkeeping.

A spawn or deliver job goes out with a session token for the agent's `the-loop comment` /
`ask`, and no GitHub token: most of them never clone (a follow-up to a live session, a
relaunch in the checkout that is there). The spawner asks for one (`mint_clone_token`) only
when it must clone: a fresh installation token that can only read the job's one repository.

The installation token is kept on the job row only until the App revokes it: when the job's
result arrives, when the job is given up, when it is offered again, or when the spawner asks
again (the new one replaces it).
Every job handed out also renews the session tokens of its work item (its session is live);
a spawn or deliver carries a new session token for the session it may start, tied to the
job (`app.fleet.tokens` keeps one live token per session).
The handover commits with the claim (`prepare_offer` runs in its transaction): one that
fails leaves the job as it was, offered again at once; `handover_failed` says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from githubkit.exception import GitHubException
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.fleet.fleet_errors import FleetError
from app.fleet.tokens import (
    drop_job_token,
    keep_job_token,
    mint_session_token,
    renew_session_tokens,
)
from app.github import GitHubNotConfigured, InstallationToken, Services
from app.store import (
    Job,
    JobKind,
    JobState,
    Sessions,
    Spawner,
    WorkItem,
    cancel,
    is_postgres,
    lease_lapsed,
    offer_failed,
)
from app.workitems import Happened, hold_line, is_live, lock_work_item, renumber, transition

log = logging.getLogger(__name__)


class MintFailed(FleetError, RuntimeError):
    """GitHub would not mint a job's repository token."""


class JobNotHeld(FleetError, RuntimeError):
    """The job stopped being the asking spawner's while its token was minted."""


@dataclass(frozen=True)
class JobOffer:
    """A claimed job as the spawner receives it."""

    job: Job
    lease: timedelta
    session_token: str | None
    spent: str | None = None  # the installation token of an earlier, lapsed claim
    withdrawn: bool = False  # a spawn its item no longer wants: not offered, take the next

    def to_json(self) -> dict[str, Any]:
        job = self.job
        return {
            "id": job.id,
            "kind": job.kind,
            "work_item_id": job.work_item_id,
            "repo": job.repo_full_name,
            "payload": job.payload,
            "lease_seconds": int(self.lease.total_seconds()),
            "session_token": self.session_token,
        }


def _installation_of(sessions: Sessions, job: Job) -> int | None:
    """The installation the job's work item belongs to (the App's record, not the payload)."""
    with sessions() as session:
        item = session.get(WorkItem, job.work_item_id)
        return item.installation_id if item is not None else None


def repository_token(services: Services, sessions: Sessions, job: Job) -> InstallationToken | None:
    """A short-lived token that can read the job's one repository (None when the App has no
    GitHub identity configured, or does not know the installation)."""
    installation = _installation_of(sessions, job)
    if installation is None or not services.github.configured:
        return None
    name = job.repo_full_name.split("/", 1)[-1]
    return services.github.repository_token(installation, name)


def take_token(job: Job) -> str | None:
    """The installation token handed out with `job`, cleared from its row (in the caller's
    transaction); `revoke` it once that transaction has committed."""
    token, job.github_token = job.github_token, None
    return token


def revoke(services: Services, token: str | None) -> None:
    """Withdraw a job's installation token; a failure is logged (it lapses within the hour)."""
    if token is None:
        return
    try:
        services.github.revoke(token)
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("could not revoke a job's installation token: %s", exc)


def mint_clone_token(
    services: Services, sessions: Sessions, job: Job, spawner_id: int
) -> dict[str, str] | None:
    """Mint the repository token a spawner needs to clone for `job`, which it holds, and
    record it on the job's row, so the job's end revokes it. A token asked for before is
    replaced and revoked: a job has at most one live token. None without a GitHub identity.

    Raises MintFailed when GitHub refuses, JobNotHeld when the job was given up, its lease
    lapsed or another spawner claimed it meanwhile (the token just minted is revoked at once)."""
    try:
        minted = repository_token(services, sessions, job)
    except (GitHubException, GitHubNotConfigured) as exc:
        log.warning("installation token for %s failed: %s", job.repo_full_name, exc)
        raise MintFailed(f"could not mint an installation token: {exc}") from exc
    if minted is None:
        return None
    with sessions() as session, session.begin():
        row = session.get(Job, job.id, with_for_update=is_postgres(sessions.engine))
        held = (
            row is not None
            and row.spawner_id == spawner_id
            and row.state == JobState.CLAIMED
            and not lease_lapsed(row, services.clock())
        )
        spent: str | None = minted.token
        if row is not None and held:
            spent = take_token(row)
            row.github_token = minted.token
    revoke(services, spent)
    if not held:
        raise JobNotHeld(f"job {job.id} is no longer held by this spawner")
    return {"token": minted.token, "expires_at": minted.expires_at.isoformat()}


def prepare_offer(
    services: Services, session: Session, job: Job, spawner: Spawner, lease: timedelta
) -> JobOffer:
    """Credentials and bookkeeping for a job `spawner` claimed in `session`'s transaction,
    which commits claim and handover together (no GitHub token: the spawner asks for one
    with `mint_clone_token` when it must clone). `revoke` the offer's `spent` token once it
    has committed. A spawn its item no longer wants is withdrawn in the same transaction
    (`withdrawn`): the caller takes the next job."""
    now = services.clock()
    spawn = job.kind == JobKind.SPAWN
    item = None
    if spawn:  # its item waits in the line: the line first, then the item (`hold_line`)
        hold_line(session)
        item = lock_work_item(session, job.work_item_id)
        if item is None or not is_live(item.state):
            _withdraw(services, session, job, item)
            return JobOffer(job, lease, None, spent=take_token(job), withdrawn=True)
    previous = take_token(job)
    session_token = None
    if job.kind in (JobKind.SPAWN, JobKind.DELIVER):
        renew_session_tokens(session, [job.work_item_id], now)
        session_token = mint_session_token(session, job.work_item_id, now, job.id)
    if spawn:  # a new session: whatever an earlier one held is void
        keep_job_token(session, job.work_item_id, job.id)
        transition(item, Happened.SPAWN_CLAIMED)
        renumber(session, leaving=item)  # the items behind it move up
    services.events.emit(
        "job.claimed",
        job.work_item_id,
        session=session,
        job=job.id,
        kind=job.kind,
        spawner=spawner.name,
        spawner_id=spawner.id,
        attempt=job.attempts,
    )
    return JobOffer(job=job, lease=lease, session_token=session_token, spent=previous)


def _withdraw(services: Services, session: Session, job: Job, item: WorkItem | None) -> None:
    """Withdraw spawn `job`, whose item no longer waits for a session (the issue closed, or
    the item otherwise left the live states, while the job was being claimed: the close
    skips a job row another transaction holds). Launching it would start a session, and
    spend on the model, for an issue nobody wants worked on."""
    state = item.state if item is not None else "gone"
    cancel(job, f"item-{state}")
    services.events.emit(
        "job.withdrawn", job.work_item_id, session=session, job=job.id, state=state
    )


def handover_failed(
    services: Services, sessions: Sessions, job_id: int, spawner: Spawner, error: BaseException
) -> None:
    """Say why the handover of job `job_id` to `spawner` failed (its claim was rolled back,
    so the job is offered again at once) and count the attempt; a job that has failed its
    `MAX_ATTEMPTS` is given up. Best effort: a database that refuses this too is logged."""
    said = f"{type(error).__name__}: {error}"[:500]
    try:
        with sessions(expire_on_commit=False) as session, session.begin():
            failed = offer_failed(session, job_id, services.clock(), said)
            row = session.get(Job, job_id)
            services.events.emit(
                "job.offer_failed",
                row.work_item_id if row is not None else None,
                session=session,
                job=job_id,
                kind=row.kind if row is not None else None,
                spawner=spawner.name,
                spawner_id=spawner.id,
                error=said,
            )
    except SQLAlchemyError:
        log.exception("could not record the failed handover of job %s", job_id)
        return
    if failed is not None:
        give_up(services, sessions, failed)


def give_up(services: Services, sessions: Sessions, failed: Job) -> None:
    """Announce a job that failed for good and withdraw its credentials: no session of it
    will ever use its session token, nor its spawner the installation token."""
    services.events.emit(
        "job.failed",
        failed.work_item_id,
        job=failed.id,
        kind=failed.kind,
        **(failed.result or {}),
    )
    with sessions() as session, session.begin():
        drop_job_token(session, failed.id)
        row = session.get(Job, failed.id)
        spent = take_token(row) if row is not None and failed.github_token else None
    revoke(services, spent)
