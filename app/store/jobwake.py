"""Waking long polls when a job is queued, in this process and in the App's other replicas.

Each App owns one `JobSignal` (`AppState.jobs`), made when its state is built and closed in
its shutdown; it serves the App's sessions (`Sessions`), which carry it in their `info`.
`queue_job` arms it (`wake_on_commit`, which hooks the queuing session itself) and it fires
when that transaction commits (never before, never on rollback), waking only the polls
whose spawner serves the job's repository. Other processes learn of new jobs from the
database itself: PostgreSQL `LISTEN the_loop_jobs` (the queue sends `NOTIFY` with the
repository name), or on SQLite a watcher that asks `PRAGMA data_version` every few
milliseconds and looks at the newest job id only when another connection committed
something.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Iterable
from typing import Protocol, Self

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from app.retry import Backoff
from app.store.engines import is_postgres
from app.store.session_factory import Sessions, hooked

NOTIFY_CHANNEL = "the_loop_jobs"
ANY_REPOSITORY = "*"
_QUEUED_FLAG = "the-loop:job-queued"
SIGNAL_KEY = "the-loop:job-signal"  # the App's signal, in its sessions' `info`


class JobSignal:
    """An in-process wake-up for long polls: a generation counter under a condition, with
    the repositories each generation concerns.

    A waiter reads `generation()` before it looks at the database and then waits for a
    generation that concerns its repositories, so a job committed between the look and the
    wait is never missed, and a spawner is not woken for other repositories' jobs.
    """

    HISTORY = 1024

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._recent: deque[tuple[int, frozenset[str] | None]] = deque(maxlen=self.HISTORY)
        self._closing = False
        self._sessions: Sessions | None = None
        self._watcher: Watcher | None = None

    def serve(self, sessions: Sessions) -> Self:
        """Be the wake-up of the jobs queued by the sessions `sessions` opens (until `close`),
        and watch their engine for the jobs other processes queue."""
        self._sessions = sessions
        sessions.put(SIGNAL_KEY, self)
        return self

    def watch(self) -> None:
        """Start (once) the wake-up for jobs other processes queue on the served engine; a
        long poll asks for it. Nothing to watch for an in-memory SQLite database."""
        with self._cond:
            engine = self._sessions.engine if self._sessions is not None else None
            if self._watcher is not None or engine is None or self._closing:
                return
            path = engine.url.database or ""
            if is_postgres(engine):
                self._watcher = JobListener(engine, self).start()
            elif path and path != ":memory:":
                self._watcher = SqliteJobWatcher(path, self).start()

    @property
    def closing(self) -> bool:
        """Whether the process stops serving: a long poll answers now, with no job."""
        return self._closing

    def close(self) -> None:
        """The App is stopping: wake every waiter, let none wait again, stop watching."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        if self._sessions is not None:
            self._sessions.drop(SIGNAL_KEY)

    def generation(self) -> int:
        with self._cond:
            return self._generation

    def notify(self, repositories: Iterable[str] | None = None) -> None:
        """Wake the waiters serving `repositories` (None: every waiter)."""
        names = None if repositories is None else frozenset(r.lower() for r in repositories)
        with self._cond:
            self._generation += 1
            self._recent.append((self._generation, names))
            self._cond.notify_all()

    def _concerns(self, seen: int, scope: frozenset[str] | None) -> bool:
        if self._closing:
            return True
        if self._generation == seen:
            return False
        if scope is None or ANY_REPOSITORY in scope:
            return True
        if not self._recent or self._recent[0][0] > seen + 1:
            return True  # what happened since `seen` is no longer known: look anyway
        for generation, names in reversed(self._recent):
            if generation <= seen:
                return False
            if names is None or names & scope:
                return True
        return False

    def wait(self, seen: int, timeout: float, scope: Iterable[str] | None = None) -> bool:
        """Block until a generation after `seen` concerns `scope`, or `timeout` seconds pass."""
        wanted = None if scope is None else frozenset(s.lower() for s in scope)
        with self._cond:
            return self._cond.wait_for(lambda: self._concerns(seen, wanted), timeout=timeout)


def _wake_after_commit(session: Session) -> None:
    pending: set[str | None] | None = session.info.pop(_QUEUED_FLAG, None)
    signal: JobSignal | None = hooked(session, SIGNAL_KEY)
    if pending and signal is not None:
        signal.notify(None if None in pending else {r for r in pending if r is not None})


def _forget_after_rollback(session: Session) -> None:
    session.info.pop(_QUEUED_FLAG, None)


def wake_on_commit(session: Session, repo_full_name: str | None) -> None:
    """Wake the pollers serving `repo_full_name` (None: all) once `session` commits.

    The wake-up is hooked onto this session only, here at the call: nothing is registered
    at import or on SQLAlchemy's `Session` class, and a rollback forgets what was asked. The
    signal is the one the App put in the session's `info` (`JobSignal.serve`): a session of
    no App wakes no one here; other processes still learn of the job from the database."""
    pending = session.info.get(_QUEUED_FLAG)
    if pending is None:
        pending = session.info[_QUEUED_FLAG] = set()
        event.listen(session, "after_commit", _wake_after_commit, once=True)
        event.listen(session, "after_rollback", _forget_after_rollback, once=True)
    pending.add(repo_full_name)


class _Watcher:
    """A daemon thread that runs `_watch` until stopped, reconnecting with backoff (0.5 s,
    doubling to 30 s) whenever the database connection fails. `ready` is set while watching."""

    name = "job-watcher"
    errors: tuple[type[BaseException], ...] = ()

    def __init__(self, signal: JobSignal) -> None:
        self._signal = signal
        self._stop = threading.Event()
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                self._watch()
            except self.errors:
                if self.ready.is_set():  # it had connected: start the backoff afresh
                    backoff.reset()
                self.ready.clear()
                self._stop.wait(backoff.next())

    def _watch(self) -> None:
        raise NotImplementedError


class JobListener(_Watcher):
    """`LISTEN the_loop_jobs` on a dedicated PostgreSQL connection: a job queued by another
    replica wakes this process's long polls. Stops when the engine is disposed."""

    name = "job-listener"

    def __init__(self, engine: Engine, signal: JobSignal) -> None:
        import psycopg

        super().__init__(signal)
        self.errors = (psycopg.Error,)
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False
        )

    @property
    def listening(self) -> threading.Event:
        return self.ready

    def _watch(self) -> None:
        import psycopg

        with psycopg.connect(self._conninfo, autocommit=True) as conn:
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            self.ready.set()
            while not self._stop.is_set():
                for note in conn.notifies(timeout=1.0, stop_after=1):
                    self._signal.notify([note.payload] if note.payload else None)


class Watcher(Protocol):
    def stop(self) -> None: ...


class SqliteJobWatcher(_Watcher):
    """Notices jobs another process queued in the same SQLite file.

    `PRAGMA data_version` changes when another connection commits; only then is the newest
    job id read. Cheap enough to ask every `interval` seconds while nothing happens.
    """

    errors = (sqlite3.Error,)

    def __init__(self, path: str, signal: JobSignal, interval: float = 0.03) -> None:
        super().__init__(signal)
        self._path = path
        self._interval = interval

    @property
    def watching(self) -> threading.Event:
        return self.ready

    def _watch(self) -> None:
        conn = sqlite3.connect(self._path, timeout=5, isolation_level=None)
        try:
            version, newest = None, self._newest(conn)
            self.ready.set()
            while not self._stop.wait(self._interval):
                now = conn.execute("PRAGMA data_version").fetchone()[0]
                if now == version:
                    continue
                version, latest = now, self._newest(conn)
                if latest > newest:
                    newest = latest
                    self._signal.notify(None)
        finally:
            conn.close()

    @staticmethod
    def _newest(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM jobs").fetchone()[0])


def poll_interval(engine: Engine) -> float:
    """How often a waiting poll re-checks the table without a wake-up: only leases that ran
    out, jobs handed back and a full spawner's room freed by a session's end need it."""
    return 2.0
