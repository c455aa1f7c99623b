"""The bed of the fault tests and `bench/fault.py`: real `the-loop serve` replicas and `the-loop
worker` processes on one PostgreSQL database, the fake GitHub on loopback, a sender that
plays GitHub (signed deliveries spread over the replicas, a failed one delivered again), and
the tally of what the handlers did on the fake GitHub.

Each delivery labels an issue of its own with the trigger label, so its handler posts one
checklist comment on that issue: a delivery handled twice shows as a second comment or as
a `workitem.label_ignored` event, a lost one as an issue with no comment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import Session

from app.fleet.tokens import create_token
from app.protocol import parse_payload
from app.store.engines import make_engine, migrate
from app.store.jobqueue import queue_job
from app.store.tables import (
    Delivery,
    Event,
    InboxState,
    Job,
    JobKind,
    WorkItem,
    WorkItemStatus,
)
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem
from tests.fakes.server import LiveServer
from tests.support import (
    APP_ID,
    POSTGRES_URL,
    WEBHOOK_SECRET,
    app_env,
    fixture_json,
    free_port,
    healthy,
    scratch_database,
    signed_headers,
    wait_for,
    with_installation,
)

ROOT = Path(__file__).resolve().parents[1]
REPO = "Codertocat/Hello-World"
TRIGGER = "the-loop: auto-execute"
logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the fake's access log


def labeled_body(number: int, repo: str = REPO) -> bytes:
    """`issues.labeled` with the trigger label on issue `number` of `repo`."""
    payload = with_installation(fixture_json("github/issues.labeled.json"))
    payload["label"] = {**payload["label"], "name": TRIGGER}
    owner, name = repo.split("/")
    payload["repository"] = {**payload["repository"], "full_name": repo, "name": name}
    payload["repository"]["owner"] = {**payload["repository"]["owner"], "login": owner}
    payload["issue"] = {**payload["issue"], "number": number, "state": "open"}
    payload["issue"]["html_url"] = f"https://github.com/{repo}/issues/{number}"
    return json.dumps(payload).encode()


@dataclass
class Proc:
    """A process of the bed: its Popen, its URL (a replica) and its log file."""

    popen: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
        self.popen.wait(timeout=30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


@dataclass
class Bed:
    """One PostgreSQL database, the fake GitHub and the processes started on them."""

    directory: Path
    env: dict[str, str]
    fake: FakeGitHub
    engine: Engine
    procs: list[Proc] = field(default_factory=list)

    def start(self, args: list[str], extra: dict[str, str] | None = None) -> Proc:
        log = self.directory / f"proc-{len(self.procs)}-{args[0]}.log"
        popen = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env={**os.environ, **self.env, **(extra or {}), "PYTHONPATH": str(ROOT)},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc = Proc(popen, log)
        self.procs.append(proc)
        return proc

    def replicas(self, count: int = 2, inbox_workers: int = 1, threads: int = 8) -> list[Proc]:
        """`count` `the-loop serve` processes on ports of their own, started together (they
        take turns at the schema's migration, as replicas deployed together do), healthy when
        returned."""
        procs = []
        for _ in range(count):
            port = free_port()
            extra = {"PORT": str(port), "THE_LOOP_INBOX_WORKERS": str(inbox_workers)}
            args = ["app.cli", "serve", "--workers", "1", "--threads", str(threads)]
            proc = self.start(args, extra)
            proc.url = f"http://127.0.0.1:{port}"
            procs.append(proc)
        for proc in procs:
            wait_for(lambda p=proc: healthy(p.url) or p.popen.poll() is not None, timeout=60)
            if proc.popen.poll() is not None:
                raise AssertionError(f"the-loop serve exited:\n{proc.tail()}")
        return procs

    def worker(self, inbox_workers: int = 2) -> Proc:
        return self.start(["app.cli", "worker"], {"THE_LOOP_INBOX_WORKERS": str(inbox_workers)})

    def cli(self, *args: str) -> str:
        """A `the-loop …` command against the bed's database; its output."""
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            cwd=ROOT,
            env={**os.environ, **self.env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def spawner_token(self, name: str) -> str:
        with Session(self.engine) as session, session.begin():
            return create_token(session, name, [REPO])

    def queue_spawns(self, count: int) -> list[int]:
        """`count` spawn jobs, each for a work item of its own (so none waits for another)."""
        ids = []
        with Session(self.engine) as session, session.begin():
            for n in range(1, count + 1):
                work_item_id = f"github:{REPO}#{n}"
                session.add(
                    WorkItem(
                        id=work_item_id,
                        repo_full_name=REPO,
                        issue_number=n,
                        installation_id=1,
                        title=f"Issue {n}",
                        html_url=f"https://github.com/{REPO}/issues/{n}",
                        clone_url=f"https://github.com/{REPO}.git",
                        state=WorkItemStatus.FROZEN,
                        frozen={"harness": "claude", "model": "", "effort": "", "skips": {}},
                    )
                )
                session.flush()
                payload = parse_payload(
                    JobKind.SPAWN,
                    {"work_item_id": work_item_id, "repo": REPO, "installation_id": 1},
                )
                job = queue_job(session, f"spawn@{work_item_id}", payload)
                assert job is not None
                ids.append(job.id)
        return ids

    def jobs(self) -> dict[int, Job]:
        with Session(self.engine) as session:
            return {job.id: job for job in session.scalars(select(Job))}

    @contextmanager
    def outage(self) -> Iterator[None]:
        """While inside: the bed's database refuses connections, and every one it had (the
        App's, this bed's own) is cut, as a server restart would. Only this database."""
        name = self.engine.url.database
        admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false'))
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )
            yield
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true'))
            admin.dispose()

    def states(self) -> Counter[str]:
        with Session(self.engine) as session:
            rows = session.execute(
                select(Delivery.state, func.count()).group_by(Delivery.state)
            ).all()
        return Counter({str(state): int(n) for state, n in rows})

    def events(self, name: str) -> list[dict[str, Any]]:
        with Session(self.engine) as session:
            query = select(Event.data).where(Event.event == name)
            return [dict(data) for data in session.scalars(query)]

    def settled(self, expected: int) -> bool:
        """Whether `expected` deliveries are stored and none is waiting for a handler."""
        states = self.states()
        return sum(states.values()) >= expected and states[InboxState.QUEUED] == 0


@contextmanager
def fault_bed(directory: Path, **settings: str) -> Iterator[Bed]:
    """A bed on a fresh PostgreSQL database; `settings` are extra environment variables."""
    key = generate_private_key_pem()
    fake = FakeGitHub(app_id=APP_ID, private_key_pem=key)
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database("postgres", directory))
        github = stack.enter_context(LiveServer(fake.wsgi()))
        env = {
            **app_env(directory, url, github.url, key),
            "THE_LOOP_ADMIN_TOKEN": "fault-admin-token-0123456789",
            **settings,
        }
        engine = make_engine(url)
        migrate(engine)
        bed = Bed(directory, env, fake, engine)
        try:
            yield bed
        finally:
            for proc in bed.procs:
                proc.kill()
            engine.dispose()


@dataclass
class Sender:
    """Plays GitHub: posts each delivery to a replica (round robin over the live ones) until
    one acknowledges it with 202; a refused or failed post is sent again shortly after, as
    GitHub's redelivery would. `acked` holds every delivery id a replica acknowledged."""

    urls: list[str]
    threads: int = 16
    acked: set[str] = field(default_factory=set)
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _turn: int = 0

    def drop(self, url: str) -> None:
        """Stop sending to `url` (its replica is gone)."""
        with self._lock:
            self.urls = [u for u in self.urls if u != url]

    def _next_url(self) -> str:
        with self._lock:
            self._turn += 1
            return self.urls[self._turn % len(self.urls)]

    def _post(self, client: httpx.Client, delivery: str, body: bytes, deadline: float) -> None:
        headers = signed_headers("issues", body, WEBHOOK_SECRET, delivery)
        while time.monotonic() < deadline:
            try:
                resp = client.post(
                    f"{self._next_url()}/github/webhooks", content=body, headers=headers
                )
                if resp.status_code == 202:
                    with self._lock:
                        self.acked.add(delivery)
                    return
            except httpx.HTTPError:
                pass
            with self._lock:
                self.failures += 1
            time.sleep(0.2)

    def send(self, deliveries: list[tuple[str, bytes]], timeout: float = 120.0) -> None:
        """Post every delivery (in this order, `threads` at a time)."""
        deadline = time.monotonic() + timeout
        local = threading.local()

        def one(item: tuple[str, bytes]) -> None:
            if not hasattr(local, "client"):
                local.client = httpx.Client(timeout=10)
            self._post(local.client, item[0], item[1], deadline)

        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(one, deliveries))


def burst(count: int, redelivered: float = 0.1, repo: str = REPO) -> list[tuple[str, bytes]]:
    """`count` deliveries, one issue each, plus `redelivered` of them sent again (same id,
    same body) right after their first copy, so the copies land on different replicas."""
    deliveries: list[tuple[str, bytes]] = []
    every = round(1 / redelivered) if redelivered else 0
    for n in range(1, count + 1):
        item = (f"fault-{n}", labeled_body(n, repo))
        deliveries.append(item)
        if every and n % every == 0:
            deliveries.append(item)
    return deliveries


@dataclass(frozen=True)
class Tally:
    """What the handlers did for the acknowledged deliveries."""

    acked: int
    lost: list[int]  # issues of acknowledged deliveries with no checklist comment
    doubled: list[int]  # issues with more than one, or handled again (label ignored)
    what: str = "deliveries acknowledged"

    def line(self) -> str:
        return f"{self.acked} {self.what}, lost {len(self.lost)}, doubled {len(self.doubled)}"


def tally(bed: Bed, acked: set[str], repo: str = REPO) -> Tally:
    comments = Counter(
        int(c["_issue"]) for c in list(bed.fake.comments.values()) if c["_repo"] == repo
    )
    again = Counter(
        int(str(e.get("work_item_id", "#0")).rsplit("#", 1)[1])
        for e in bed.events("workitem.label_ignored")
    )
    issues = sorted(int(d.rsplit("-", 1)[1]) for d in acked)
    lost = [n for n in issues if comments[n] == 0]
    doubled = sorted({n for n, c in comments.items() if c > 1} | set(again))
    return Tally(len(issues), lost, doubled)
