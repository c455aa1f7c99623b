"""The job queue between the App and its spawners: queue, claim with a lease, finish.

A job's `key` (derived from the delivery that caused it) makes queuing idempotent: a handler
re-run after a crash queues nothing new. A spawner claims a job for a lease; a spawner that
dies simply stops extending it and the job is offered again once it runs out, so a job is
never held by two spawners at once and never lost. Jobs of one work item run in order (a
follow-up is not delivered before its session was spawned), and deliver/stop jobs go to the
spawner whose tmux holds that item's session.

Claiming is `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL; on SQLite a conditional UPDATE
under the database's single-writer lock, checked by its row count. Waiting spawners are
woken when a job commits: in this process through `JOB_SIGNAL`, in other replicas through
PostgreSQL `LISTEN/NOTIFY` on `NOTIFY_CHANNEL`.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, and_, event, exists, func, or_, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.elements import ColumnElement

from app.store import is_postgres
from app.store.models import Job, JobKind, JobState, WorkItem

NOTIFY_CHANNEL = "the_loop_jobs"
LEASE = timedelta(seconds=120)
MAX_ATTEMPTS = 5  # claims whose lease ran out before the job is given up as failed
ANY_REPOSITORY = "*"
_QUEUED_FLAG = "the-loop:job-queued"


class JobSignal:
    """An in-process wake-up for long polls: a generation counter under a condition.

    A waiter reads `generation()` before it looks at the database and then waits for the
    number to change, so a job committed between the look and the wait is never missed.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    def generation(self) -> int:
        with self._cond:
            return self._generation

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Block until the generation moves past `seen` or `timeout` seconds pass."""
        with self._cond:
            return self._cond.wait_for(lambda: self._generation != seen, timeout=timeout)


JOB_SIGNAL = JobSignal()


@event.listens_for(Session, "after_commit")
def _wake_after_commit(session: Session) -> None:
    if session.info.pop(_QUEUED_FLAG, False):
        JOB_SIGNAL.notify()


@event.listens_for(Session, "after_rollback")
def _forget_after_rollback(session: Session) -> None:
    session.info.pop(_QUEUED_FLAG, None)


def queue_job(
    session: Session,
    kind: JobKind,
    key: str,
    work_item: str,
    repo_full_name: str,
    payload: dict[str, Any],
) -> Job | None:
    """Add a job unless one with `key` exists; returns the new job, or None for a repeat.

    Waiting spawners are woken when the caller's transaction commits.
    """
    if session.scalars(select(Job).where(Job.key == key)).first() is not None:
        return None
    job = Job(
        key=key,
        kind=kind,
        work_item=work_item,
        repo_full_name=repo_full_name,
        payload=payload,
        target_spawner_id=None if kind == JobKind.SPAWN else _host_of(session, work_item),
    )
    session.add(job)
    session.flush()
    session.info[_QUEUED_FLAG] = True
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :id)"), {"channel": NOTIFY_CHANNEL, "id": str(job.id)}
        )
    return job


def _host_of(session: Session, work_item: str) -> int | None:
    """The spawner whose tmux holds the item's session, when one was reported."""
    item = session.get(WorkItem, work_item)
    host = (item.session or {}).get("spawner_id") if item is not None else None
    return int(host) if isinstance(host, int) else None


def retarget(session: Session, work_item: str, spawner_id: int) -> None:
    """Send the item's waiting deliver/stop jobs to the spawner that now hosts its session."""
    session.execute(
        update(Job)
        .where(
            Job.work_item == work_item,
            Job.kind != JobKind.SPAWN,
            Job.state == JobState.QUEUED,
        )
        .values(target_spawner_id=spawner_id)
    )


def _claimable(now: datetime, spawner_id: int, scope: list[str]) -> ColumnElement[bool]:
    earlier = aliased(Job)
    blocked = exists().where(
        earlier.work_item == Job.work_item,
        earlier.id < Job.id,
        earlier.state.in_([JobState.QUEUED, JobState.CLAIMED]),
    )
    condition = and_(
        or_(
            Job.state == JobState.QUEUED,
            and_(Job.state == JobState.CLAIMED, Job.lease_until < now),
        ),
        Job.attempts < MAX_ATTEMPTS,
        or_(Job.target_spawner_id.is_(None), Job.target_spawner_id == spawner_id),
        ~blocked,
    )
    if ANY_REPOSITORY not in scope:
        condition = and_(condition, func.lower(Job.repo_full_name).in_([s.lower() for s in scope]))
    return condition


def claim_job(
    engine: Engine, spawner_id: int, scope: list[str], now: datetime, lease: timedelta = LEASE
) -> Job | None:
    """Take the oldest job `spawner_id` may run, for `lease`; None when there is none."""
    if not scope:
        return None
    with Session(engine, expire_on_commit=False) as session, session.begin():
        query = select(Job).where(_claimable(now, spawner_id, scope)).order_by(Job.id).limit(5)
        if is_postgres(engine):
            query = query.with_for_update(skip_locked=True, of=Job)
        for row in session.scalars(query).all():
            try:
                taken = session.execute(
                    update(Job)
                    .where(Job.id == row.id, _claimable(now, spawner_id, scope))
                    .values(
                        state=JobState.CLAIMED,
                        spawner_id=spawner_id,
                        lease_until=now + lease,
                        attempts=Job.attempts + 1,
                    )
                    .execution_options(synchronize_session=False)
                )
            except OperationalError:  # SQLite: another writer held the lock too long
                return None
            if taken.rowcount == 1:  # type: ignore[attr-defined]
                session.refresh(row)
                return row
    return None


def give_up_expired(engine: Engine, now: datetime) -> list[Job]:
    """Fail jobs whose lease ran out `MAX_ATTEMPTS` times: each claimer died on them."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
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


def release(engine: Engine, job_id: int, spawner_id: int) -> None:
    """Hand a claimed job back at once (the App could not prepare it for the spawner)."""
    with Session(engine) as session, session.begin():
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.spawner_id == spawner_id, Job.state == JobState.CLAIMED)
            .values(state=JobState.QUEUED, lease_until=None, attempts=Job.attempts - 1)
        )
        session.info[_QUEUED_FLAG] = True


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
    return Finish.FINISHED, job


class JobListener:
    """`LISTEN the_loop_jobs` on a dedicated PostgreSQL connection: a job queued by another
    replica wakes this process's long polls. Reconnects with backoff; stops when the engine
    is disposed."""

    def __init__(self, engine: Engine, signal: JobSignal = JOB_SIGNAL) -> None:
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False
        )
        self._signal = signal
        self._stop = threading.Event()
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-listener", daemon=True)

    def start(self) -> JobListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        import psycopg

        delay = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening.set()
                    delay = 0.5
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self._signal.notify()
            except psycopg.Error:
                self.listening.clear()
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)


_LISTENERS: dict[int, JobListener] = {}
_LISTENERS_LOCK = threading.Lock()


def listen_for_jobs(engine: Engine) -> JobListener | None:
    """Start (once per engine) the cross-replica wake-up; None on SQLite, where waiters
    re-check the table every `poll_interval(engine)` seconds instead."""
    if not is_postgres(engine):
        return None
    with _LISTENERS_LOCK:
        listener = _LISTENERS.get(id(engine))
        if listener is None:
            listener = _LISTENERS[id(engine)] = JobListener(engine).start()
            event.listen(engine, "engine_disposed", lambda _conn: _forget(engine))
        return listener


def _forget(engine: Engine) -> None:
    with _LISTENERS_LOCK:
        listener = _LISTENERS.pop(id(engine), None)
    if listener is not None:
        listener.stop()


def poll_interval(engine: Engine) -> float:
    """How often a waiting poll re-checks the table without a wake-up: often on SQLite (other
    processes cannot notify it), rarely on PostgreSQL (only expired leases need it)."""
    return 2.0 if is_postgres(engine) else 0.5
