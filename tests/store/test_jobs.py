"""The job queue on real SQLite and PostgreSQL: exclusive claims under concurrency, leases,
per-item order, routing to the session's host, and the wake-up of waiting polls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.protocol import Frozen, SpawnJob, parse_payload
from app.store import Sessions, hooked
from app.store.engines import make_engine, migrate
from app.store.jobqueue import (
    MAX_ATTEMPTS,
    Finish,
    finish,
    give_up_expired,
    heartbeat,
    queue_job,
    take_job,
)
from app.store.jobwake import SIGNAL_KEY, JobListener, JobSignal, SqliteJobWatcher
from app.store.tables import Job, JobKind, JobState, WorkItem, WorkItemStatus
from tests.support import scratch_database

LEASE = timedelta(seconds=60)
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def claim_job(
    engine: Engine,
    spawner_id: int,
    scope: list[str],
    now: datetime,
    lease: timedelta,
    harnesses: list[str] | None = None,
) -> Job | None:
    """`take_job` in a transaction of its own, committed before this returns."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        return take_job(session, spawner_id, scope, now, lease, harnesses)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def db_url(request, tmp_path_factory):
    with scratch_database(request.param, tmp_path_factory.mktemp("jobs")) as url:
        engine = make_engine(url)
        migrate(engine)
        engine.dispose()
        yield url


@pytest.fixture
def queue_engine(db_url):
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def repo():
    return f"o{uuid.uuid4().hex[:10]}/repo"


def _spawn(repo: str, number: int = 1, harness: str = "") -> SpawnJob:
    return SpawnJob(
        work_item_id=f"github:{repo}#{number}", repo=repo, frozen=Frozen(harness=harness)
    )


def _queue(engine, repo: str, n: int, kind: JobKind = JobKind.SPAWN, item: int | None = None):
    ids = []
    with Session(engine) as session, session.begin():
        for i in range(n):
            work_item_id = f"github:{repo}#{item if item is not None else i}"
            payload = parse_payload(kind, {"work_item_id": work_item_id, "repo": repo})
            job = queue_job(session, f"{kind}:{uuid.uuid4()}", payload)
            ids.append(job.id)
    return ids


def test_queue_is_idempotent_by_key(queue_engine, repo):
    with Session(queue_engine) as session, session.begin():
        first = queue_job(session, f"spawn:{repo}", _spawn(repo))
        again = queue_job(session, f"spawn:{repo}", _spawn(repo))
    assert first is not None and again is None


def test_threads_claiming_at_once_never_share_a_job(queue_engine, repo):
    ids = _queue(queue_engine, repo, 40)
    taken: dict[int, list[int]] = {}
    lock = threading.Lock()
    start = threading.Barrier(6)

    def claimer(spawner_id: int) -> None:
        start.wait()
        while (job := claim_job(queue_engine, spawner_id, [repo], T0, LEASE)) is not None:
            with lock:
                taken.setdefault(job.id, []).append(spawner_id)
            assert job.state == JobState.CLAIMED and job.spawner_id == spawner_id

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    doubles = {job: who for job, who in taken.items() if len(who) > 1}
    assert doubles == {}
    assert sorted(taken) == ids


CLAIMER = """
import json, sys, time
from datetime import datetime, timedelta
from app.store.engines import make_engine
from sqlalchemy.orm import Session
from app.store.jobqueue import take_job
url, repo, spawner, now = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
engine = make_engine(url)
engine.connect().close()
print("ready", flush=True)
sys.stdin.readline()
got = []
def claim():
    with Session(engine) as session, session.begin():
        job = take_job(session, spawner, [repo], datetime.fromisoformat(now), timedelta(seconds=60))
        return None if job is None else job.id
while (job := claim()) is not None:
    got.append(job)
    time.sleep(0.002)  # a spawner does work between claims; lets the others overlap
print(json.dumps(got))
"""


def test_processes_claiming_at_once_never_share_a_job(queue_engine, db_url, repo):
    ids = _queue(queue_engine, repo, 60)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, db_url, repo, str(n), T0.isoformat()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        for n in (1, 2, 3)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:  # start them together
        proc.stdin.write("go\n")
        proc.stdin.flush()
    claimed = [json.loads(proc.communicate(timeout=90)[0]) for proc in procs]
    flat = [job for got in claimed for job in got]
    assert len(flat) == len(set(flat)), "a job was claimed by two processes"
    assert sorted(flat) == ids
    assert sum(1 for got in claimed if got) >= 2, "the claimers did not overlap"


def test_an_expired_lease_offers_the_job_again(queue_engine, repo):
    (job_id,) = _queue(queue_engine, repo, 1)
    assert claim_job(queue_engine, 1, [repo], T0, LEASE).id == job_id
    assert claim_job(queue_engine, 2, [repo], T0 + LEASE - timedelta(seconds=1), LEASE) is None
    again = claim_job(queue_engine, 2, [repo], T0 + LEASE + timedelta(seconds=1), LEASE)
    assert again.id == job_id and again.spawner_id == 2 and again.attempts == 2
    with Session(queue_engine) as session, session.begin():
        assert finish(session, job_id, 1, True, {"ok": True})[0] == Finish.NOT_HELD
        assert not heartbeat(session, job_id, 1, T0, LEASE)
        assert finish(session, job_id, 2, True, {"ok": True})[0] == Finish.FINISHED
    with Session(queue_engine) as session:
        assert session.get(Job, job_id).state == JobState.DONE


def test_heartbeat_moves_the_lease_forward(queue_engine, repo):
    (job_id,) = _queue(queue_engine, repo, 1)
    claim_job(queue_engine, 1, [repo], T0, LEASE)
    later = T0 + LEASE - timedelta(seconds=5)
    with Session(queue_engine) as session, session.begin():
        assert heartbeat(session, job_id, 1, later, LEASE)
    assert claim_job(queue_engine, 2, [repo], T0 + LEASE + timedelta(seconds=1), LEASE) is None
    assert (
        claim_job(queue_engine, 2, [repo], later + LEASE + timedelta(seconds=1), LEASE).id == job_id
    )


def test_scope_limits_what_a_spawner_sees(queue_engine, repo):
    (job_id,) = _queue(queue_engine, repo, 1)
    assert claim_job(queue_engine, 1, ["someone/else"], T0, LEASE) is None
    assert claim_job(queue_engine, 1, [], T0, LEASE) is None
    assert claim_job(queue_engine, 1, [repo.upper()], T0, LEASE).id == job_id


def test_jobs_of_one_item_run_in_order(queue_engine, repo):
    spawn, deliver = (
        _queue(queue_engine, repo, 1, JobKind.SPAWN, item=5)[0],
        _queue(queue_engine, repo, 1, JobKind.DELIVER, item=5)[0],
    )
    (other,) = _queue(queue_engine, repo, 1, JobKind.SPAWN, item=6)
    assert claim_job(queue_engine, 1, [repo], T0, LEASE).id == spawn
    assert claim_job(queue_engine, 2, [repo], T0, LEASE).id == other  # not the deliver: spawn first
    assert claim_job(queue_engine, 2, [repo], T0, LEASE) is None
    with Session(queue_engine) as session, session.begin():
        finish(session, spawn, 1, True, {"ok": True})
    assert claim_job(queue_engine, 2, [repo], T0, LEASE).id == deliver


def test_follow_ups_go_to_the_spawner_hosting_the_session(queue_engine, repo):
    item = f"github:{repo}#9"
    with Session(queue_engine) as session, session.begin():
        session.add(
            WorkItem(
                id=item,
                repo_full_name=repo,
                issue_number=9,
                state=WorkItemStatus.RUNNING,
                session={"session_id": "s", "spawner_id": 7},
            )
        )
    (deliver,) = _queue(queue_engine, repo, 1, JobKind.DELIVER, item=9)
    assert claim_job(queue_engine, 1, [repo], T0, LEASE) is None
    assert claim_job(queue_engine, 7, [repo], T0, LEASE).id == deliver


def test_a_job_nobody_finishes_is_given_up_after_max_attempts(queue_engine, repo):
    (job_id,) = _queue(queue_engine, repo, 1)
    now = T0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job = claim_job(queue_engine, attempt, [repo], now, LEASE)
        assert job is not None and job.attempts == attempt
        now += LEASE + timedelta(seconds=1)
    assert claim_job(queue_engine, 99, [repo], now, LEASE) is None
    failed = give_up_expired(Sessions(queue_engine), now)
    assert [j.id for j in failed if j.repo_full_name == repo] == [job_id]
    with Session(queue_engine) as session:
        assert session.get(Job, job_id).state == JobState.FAILED


def test_a_committed_queue_wakes_waiters_and_a_rolled_back_one_does_not(queue_engine, repo):
    sessions = Sessions(queue_engine)
    signal = JobSignal().serve(sessions)
    seen = signal.generation()
    with sessions() as session:
        session.begin()
        queue_job(session, f"rb:{repo}", _spawn(repo))
        assert signal.generation() == seen  # not before the commit
        session.rollback()
    assert not signal.wait(seen, 0.2)
    with sessions() as session, session.begin():
        queue_job(session, f"ok:{repo}", _spawn(repo))
    assert signal.wait(seen, 0.01)
    signal.close()


def test_only_the_app_s_own_sessions_wake_its_long_polls(queue_engine, repo):
    """The signal rides in the `info` of the sessions the App opens: a session opened apart
    from them (another App's, a command's) wakes nothing here, and neither does the App's
    own once its signal is closed."""
    mine, apart = Sessions(queue_engine), Sessions(queue_engine)
    signal = JobSignal().serve(mine)
    seen = signal.generation()
    with apart() as session, session.begin():
        queue_job(session, f"apart:{repo}", _spawn(repo))
    assert not signal.wait(seen, 0.2)
    with mine() as session, session.begin():
        queue_job(session, f"mine:{repo}", _spawn(repo))
    assert signal.wait(seen, 0.01)  # the control: the App's own session does wake it
    signal.close()
    with mine() as session:
        assert hooked(session, SIGNAL_KEY) is None


def test_a_job_queued_by_another_replica_wakes_this_one(db_url, repo):
    """Two engines stand for two App processes; only the database connects their waiters:
    LISTEN/NOTIFY on PostgreSQL, the data-version watcher on SQLite."""
    here, there = make_engine(db_url), make_engine(db_url)
    signal = JobSignal()  # this process's waiters, which the other's commit cannot touch
    if db_url.startswith("postgresql"):
        watcher = JobListener(here, signal).start()
        ready = watcher.listening
    else:
        watcher = SqliteJobWatcher(here.url.database, signal).start()
        ready = watcher.watching
    try:
        assert ready.wait(10)
        seen = signal.generation()
        with Session(there) as session, session.begin():
            queue_job(session, f"n:{repo}", _spawn(repo))
        queued = time.monotonic()
        assert signal.wait(seen, 5.0, scope=[repo])
        assert time.monotonic() - queued < 1.0
    finally:
        watcher.stop()
        here.dispose()
        there.dispose()


def test_waiters_are_woken_only_for_their_repositories():
    signal = JobSignal()
    seen = signal.generation()
    signal.notify(["other/repo"])
    assert not signal.wait(seen, 0.05, scope=["mine/repo"])
    assert signal.wait(seen, 0.05, scope=["*"])
    signal.notify(["Mine/Repo"])
    assert signal.wait(seen, 0.05, scope=["mine/repo"])
    later = signal.generation()
    signal.notify(None)  # a job handed back: everyone looks
    assert signal.wait(later, 0.05, scope=["mine/repo"])
    for _ in range(JobSignal.HISTORY + 1):
        signal.notify(["other/repo"])
    assert signal.wait(later, 0.05, scope=["mine/repo"])  # history lost: look rather than miss


def test_a_spawn_goes_to_a_spawner_that_hosts_its_frozen_harness(queue_engine, repo):
    with Session(queue_engine) as session, session.begin():
        codex = queue_job(session, f"c:{repo}", _spawn(repo, 1, harness="codex")).id
        default = queue_job(session, f"d:{repo}", _spawn(repo, 2, harness="")).id
    assert claim_job(queue_engine, 1, [repo], T0, LEASE, harnesses=["claude"]).id == default
    assert claim_job(queue_engine, 1, [repo], T0, LEASE, harnesses=["claude"]) is None
    assert claim_job(queue_engine, 2, [repo], T0, LEASE, harnesses=["claude", "codex"]).id == codex
