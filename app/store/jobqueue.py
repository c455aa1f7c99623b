"""The job queue between the App and its spawners: queue, claim with a lease, finish.

A job's `key` (derived from the delivery that caused it) makes queuing idempotent: a handler
re-run after a crash queues nothing new. A spawner claims a job for a lease; a spawner that
dies simply stops extending it and the job is offered again once it runs out, so a job is
never held by two spawners at once and never lost. A claim commits with its handover
(`take_job` runs in the caller's transaction): a handover that fails rolls the claim back,
so the job is offered again at once, and counts as an attempt (`offer_failed`). Jobs of one
work item run in order (a follow-up is not delivered before its session was spawned), and
deliver/stop jobs go to the spawner whose tmux holds that item's session.

Claiming is `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL; on SQLite a conditional UPDATE
under the database's single-writer lock, checked by its row count. Waiting spawners are
woken when a job commits (see `app.store.jobwake`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Boolean,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.elements import ColumnElement

from app.protocol import JobPayload, dump_payload
from app.store.engines import is_postgres
from app.store.jobwake import ANY_REPOSITORY, NOTIFY_CHANNEL, wake_on_commit
from app.store.session_factory import Sessions
from app.store.tables import Job, JobKind, JobState, WorkItem, WorkItemStatus, aware

LEASE = timedelta(seconds=120)
MAX_ATTEMPTS = 5  # claims whose lease ran out before the job is given up as failed


def queue_job(session: Session, key: str, payload: JobPayload) -> Job | None:
    """Add the job `payload` describes unless one with `key` exists; returns the new job, or
    None for a repeat.

    Waiting spawners are woken when the caller's transaction commits.
    """
    if session.scalars(select(Job).where(Job.key == key)).first() is not None:
        return None
    spawn = payload.kind == JobKind.SPAWN
    job = Job(
        key=key,
        kind=payload.kind,
        work_item_id=payload.work_item_id,
        repo_full_name=payload.repo,
        payload=dump_payload(payload),
        target_spawner_id=None if spawn else _host_of(session, payload.work_item_id),
        # A spawn frozen on a harness goes only to a spawner that hosts it ("": any).
        harness=(payload.frozen.harness or None) if spawn else None,
    )
    session.add(job)
    session.flush()
    _announce(session, payload.repo)
    return job


def announce(session: Session, repo: str) -> None:
    """Wake the pollers serving `repo` once `session` commits: a job of it may be claimable
    now that was not (its repository's spend cap lifted)."""
    _announce(session, repo)


def _announce(session: Session, repo: str) -> None:
    """Wake the pollers serving `repo` once `session` commits: in this process, and in the
    App's other replicas through PostgreSQL's NOTIFY (SQLite's watcher sees the commit)."""
    wake_on_commit(session, repo)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :repo)"), {"channel": NOTIFY_CHANNEL, "repo": repo}
        )


def _host_of(session: Session, work_item_id: str) -> int | None:
    """The spawner whose tmux holds the item's session, when one was reported."""
    item = session.get(WorkItem, work_item_id)
    host = (item.session or {}).get("spawner_id") if item is not None else None
    return int(host) if isinstance(host, int) else None


def retarget(session: Session, work_item_id: str, spawner_id: int) -> None:
    """Send the item's waiting deliver/stop jobs to the spawner that now hosts its session."""
    session.execute(
        update(Job)
        .where(
            Job.work_item_id == work_item_id,
            Job.kind != JobKind.SPAWN,
            Job.state == JobState.QUEUED,
        )
        .values(target_spawner_id=spawner_id)
    )


def _build_claimable() -> ColumnElement[bool]:
    """Which jobs a spawner may take now: due, in order for its work item, meant for it, of a
    harness it hosts, of a repository it serves, and — for a spawn, or a follow-up that
    relaunches an exited session — while it has room for another session and its repository
    is not held by a spend cap (parameters `now`, `spawner`, `any_harness`, `harnesses`,
    `any_repo`, `scope`, `may_spawn`, `held`).

    Built once: a claim runs on every long-poll wake-up, and composing this expression costs
    more than running it.
    """
    earlier = aliased(Job)
    # A follow-up for an item whose session exited relaunches it: it needs room like a spawn.
    relaunch = and_(
        Job.kind == JobKind.DELIVER,
        exists().where(WorkItem.id == Job.work_item_id, WorkItem.state == WorkItemStatus.EXITED),
    )
    blocked = exists().where(
        earlier.work_item_id == Job.work_item_id,
        earlier.id < Job.id,
        earlier.state.in_([JobState.QUEUED, JobState.CLAIMED]),
    )
    return and_(
        or_(
            Job.state == JobState.QUEUED,
            and_(Job.state == JobState.CLAIMED, Job.lease_until < bindparam("now")),
        ),
        Job.attempts < MAX_ATTEMPTS,
        or_(
            and_(
                bindparam("may_spawn", type_=Boolean),
                func.lower(Job.repo_full_name).not_in(bindparam("held", expanding=True)),
            ),
            and_(Job.kind != JobKind.SPAWN, ~relaunch),
        ),
        or_(Job.target_spawner_id.is_(None), Job.target_spawner_id == bindparam("spawner")),
        or_(
            bindparam("any_harness", type_=Boolean),
            Job.harness.is_(None),
            Job.harness.in_(bindparam("harnesses", expanding=True)),
        ),
        or_(
            bindparam("any_repo", type_=Boolean),
            func.lower(Job.repo_full_name).in_(bindparam("scope", expanding=True)),
        ),
        ~blocked,
    )


_CLAIMABLE = _build_claimable()
_CANDIDATES = select(Job.id).where(_CLAIMABLE).order_by(Job.id).limit(5)
_TAKE = (
    update(Job)
    .where(Job.id == bindparam("job"), _CLAIMABLE)
    .values(
        state=JobState.CLAIMED,
        spawner_id=bindparam("claimer"),
        lease_until=bindparam("until"),
        attempts=Job.attempts + 1,
    )
    .execution_options(synchronize_session=False)
)


def take_job(
    session: Session,
    spawner_id: int,
    scope: list[str],
    now: datetime,
    lease: timedelta = LEASE,
    harnesses: list[str] | None = None,
    spawns: bool = True,
    held: list[str] | None = None,
) -> Job | None:
    """Take the oldest job `spawner_id` may run, for `lease`, in the caller's transaction;
    None when there is none. The claim holds only if that transaction commits: a caller that
    fails to hand the job over rolls it back, and the job is offered again at once.

    With `harnesses`, a spawn frozen on a harness outside that list is left for a spawner
    that hosts it. Without `spawns` (the spawner has no room for another session) only jobs
    for sessions it already runs are offered: deliver, stop and answer for a live session
    are never held back; a follow-up that would relaunch an exited one waits for room.
    Spawns and relaunches of the repositories in `held` (lower case) wait likewise.
    """
    if not scope:
        return None
    params = {
        "now": now,
        "spawner": spawner_id,
        "any_harness": harnesses is None,
        "harnesses": list(harnesses or []),
        "any_repo": ANY_REPOSITORY in scope,
        "scope": [s.lower() for s in scope],
        "may_spawn": spawns,
        "held": [h.lower() for h in held or []],
    }
    candidates = _CANDIDATES
    if is_postgres(session.get_bind().engine):
        candidates = candidates.with_for_update(skip_locked=True, of=Job)
    for job_id in session.scalars(candidates, params).all():
        try:
            taken = session.execute(
                _TAKE, {**params, "job": job_id, "claimer": spawner_id, "until": now + lease}
            )
        except OperationalError:  # SQLite: another writer held the lock too long
            return None
        if taken.rowcount == 1:  # type: ignore[attr-defined]
            return session.get(Job, job_id)
    return None


def cancel(job: Job, why: str) -> None:
    """End `job` unrun, because what it was for is gone (`why`: "issue-closed", …): done,
    held by nobody, its result saying so."""
    job.state = JobState.DONE
    job.spawner_id = None
    job.lease_until = None
    job.result = {"cancelled": why}


def offer_failed(session: Session, job_id: int, now: datetime, error: str) -> Job | None:
    """Count a claim whose handover failed (and was rolled back) like one whose lease ran
    out, so a job no handover can succeed on ends: at `MAX_ATTEMPTS` it fails with `error`
    (returned then; None otherwise). Waiting spawners are woken: the job is theirs to take.
    A job another spawner took meanwhile is left to it, uncounted."""
    job = session.get(Job, job_id, with_for_update=is_postgres(session.get_bind().engine))
    if job is None or job.state in (JobState.DONE, JobState.FAILED):
        return None
    if job.state == JobState.CLAIMED and not lease_lapsed(job, now):
        return None
    job.attempts += 1
    if job.attempts < MAX_ATTEMPTS:
        _announce(session, job.repo_full_name)
        return None
    job.state = JobState.FAILED
    job.lease_until = None
    job.result = {"error": f"its handover failed {job.attempts} times, last: {error}"}
    if _waiting_behind(session, job):
        _announce(session, job.repo_full_name)
    return job


def give_up_expired(sessions: Sessions, now: datetime) -> list[Job]:
    """Fail jobs whose lease ran out `MAX_ATTEMPTS` times: each claimer died on them."""
    with sessions(expire_on_commit=False) as session, session.begin():
        rows = session.scalars(
            select(Job).where(
                Job.state == JobState.CLAIMED,
                Job.lease_until < now,
                Job.attempts >= MAX_ATTEMPTS,
            )
        ).all()
        for row in rows:
            row.state = JobState.FAILED
            row.lease_until = None
            row.result = {"error": f"lease expired {row.attempts} times; no spawner finished it"}
        return list(rows)


def heartbeat(
    session: Session, job_id: int, spawner_id: int, now: datetime, lease: timedelta = LEASE
) -> bool:
    """Extend the lease of a job `spawner_id` holds; False when it no longer holds it."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.spawner_id == spawner_id, Job.state == JobState.CLAIMED)
        .values(lease_until=now + lease)
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


def lease_lapsed(job: Job, now: datetime) -> bool:
    """Whether the lease on claimed `job` ran out before `now`: the job is offered again, so
    the spawner that held it may no longer act for it (a heartbeat still revives it while no
    other spawner took it)."""
    until = aware(job.lease_until)
    return job.state == JobState.CLAIMED and until is not None and until < now


def claimed_jobs(session: Session, work_item_id: str) -> list[int]:
    """The ids of `work_item_id`'s jobs a spawner holds now."""
    query = select(Job.id).where(Job.work_item_id == work_item_id, Job.state == JobState.CLAIMED)
    return list(session.scalars(query))


class Finish(StrEnum):
    """What recording a job's result did."""

    FINISHED = "finished"  # this call completed the job
    REPEAT = "repeat"  # the same spawner already reported it (a retried request)
    NOT_HELD = "not-held"  # the job is held by another spawner, or was given up
    UNKNOWN = "unknown"  # no such job


def finish(
    session: Session, job_id: int, spawner_id: int, ok: bool, result: dict[str, Any]
) -> tuple[Finish, Job | None]:
    """Record the outcome of a job the spawner holds (done or failed), once."""
    job = session.get(Job, job_id, with_for_update=is_postgres(session.get_bind().engine))
    if job is None:
        return Finish.UNKNOWN, None
    if job.spawner_id != spawner_id:
        return Finish.NOT_HELD, job
    if job.state in (JobState.DONE, JobState.FAILED):
        return (Finish.REPEAT if job.result == result else Finish.NOT_HELD), job
    if job.state != JobState.CLAIMED:
        return Finish.NOT_HELD, job
    job.state = JobState.DONE if ok else JobState.FAILED
    job.result = result
    job.lease_until = None
    if _waiting_behind(session, job):
        _announce(session, job.repo_full_name)  # the next job of this item is claimable now
    return Finish.FINISHED, job


def _waiting_behind(session: Session, job: Job) -> bool:
    """Whether a later job of `job`'s work item waits in the queue (jobs of one item run in
    order, so it could not be claimed until this one finished)."""
    later = select(Job.id).where(
        Job.work_item_id == job.work_item_id, Job.id > job.id, Job.state == JobState.QUEUED
    )
    return session.scalars(later.limit(1)).first() is not None
