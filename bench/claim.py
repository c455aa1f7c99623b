#!/usr/bin/env python3
"""Job hand-over benchmark: queue → a long-polling spawner has the job, over real HTTP.

Serves the App's spawner API on 127.0.0.1 (threaded WSGI server, fresh SQLite store or
--postgres), starts --spawners clients that long-poll `/spawner/v1/jobs?wait=25` and
report each job's result at once, then queues --jobs jobs (one work item each, spread over
the spawners' repositories) every --interval seconds.

With --remote-producer the jobs are queued by a separate process (another App replica):
on PostgreSQL the waiting polls are woken by LISTEN/NOTIFY, on SQLite by the short re-check.
Prints p50/p99/max hand-over latency and the throughput of claim + result round trips.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

    from app.runtime.app_state import AppState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_P99_MS = 100.0

PRODUCER = """
import json, sys, time
from sqlalchemy.orm import Session
from app.store.engines import make_engine
from app.store.jobqueue import queue_job
from app.protocol import StopJob
url, repos = sys.argv[1], json.loads(sys.argv[2])
count, interval = int(sys.argv[3]), float(sys.argv[4])
engine = make_engine(url)
engine.connect().close()
for i in range(count):
    repo = repos[i % len(repos)]
    with Session(engine, expire_on_commit=False) as s, s.begin():
        item = f"github:{repo}#{i}"
        job = queue_job(s, f"bench:{i}", StopJob(work_item_id=item, repo=repo, reason="b"))
    print(json.dumps([job.id, time.time()]), flush=True)
    time.sleep(interval)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serve(db_url: str, tmp: Path) -> tuple[str, AppState, BaseWSGIServer]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    from werkzeug.serving import make_server

    from app.config.process_settings import load_settings
    from app.runtime.flask_app import create_app

    (tmp / "cli-config.yaml").write_text("{}\n")
    env = {
        "GITHUB_WEBHOOK_SECRET": "bench",
        "DATABASE_URL": db_url,
        "THE_LOOP_STATE_DIR": str(tmp / "state"),
        "THE_LOOP_CONFIG": str(tmp / "cli-config.yaml"),
    }
    app = create_app(load_settings(env, dotenv=None), start_workers=False)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", app.extensions["the-loop"], server


def spawner_loop(url: str, token: str, got: dict[int, float], stop: threading.Event) -> None:
    with httpx.Client(
        base_url=f"{url}/spawner/v1", headers={"Authorization": f"Bearer {token}"}, timeout=40
    ) as client:
        client.post("/register", json={"name": "bench", "harnesses": ["claude"]})
        while not stop.is_set():
            resp = client.get("/jobs", params={"wait": 25})
            if resp.status_code != 200:
                continue
            job = resp.json()["job"]
            got[job["id"]] = time.time()
            client.post(f"/jobs/{job['id']}/result", json={"ok": True, "result": {}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spawners", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between queues")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL server to use instead of SQLite; the bench creates (and drops) its "
        "own database there",
    )
    parser.add_argument("--remote-producer", action="store_true", help="queue from another process")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="the-loop-bench-claim-"))
    with scratch_database(args.postgres, tmp) as db_url:
        return run(args, db_url, tmp)


@contextmanager
def scratch_database(server_url: str | None, tmp: Path) -> Iterator[str]:
    if not server_url:
        yield f"sqlite:///{tmp / 'the-loop.db'}"
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def run(args: argparse.Namespace, db_url: str, tmp: Path) -> int:

    from app.fleet.tokens import create_token
    from app.protocol import StopJob
    from app.store.jobqueue import queue_job

    url, state, server = serve(db_url, tmp)
    repos = [f"bench/repo-{n}" for n in range(args.spawners)]
    with state.sessions() as session, session.begin():
        tokens = [create_token(session, f"bench-{n}", [repo]) for n, repo in enumerate(repos)]
    got: dict[int, float] = {}
    stop = threading.Event()
    threads = [
        threading.Thread(target=spawner_loop, args=(url, t, got, stop), daemon=True) for t in tokens
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every spawner registered and waiting

    queued: dict[int, float] = {}
    started = time.time()
    if args.remote_producer:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                PRODUCER,
                db_url,
                json.dumps(repos),
                str(args.jobs),
                str(args.interval),
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        queued = {job: ts for job, ts in map(json.loads, proc.stdout.splitlines())}
    else:
        for i in range(args.jobs):
            repo = repos[i % len(repos)]
            with state.sessions(expire_on_commit=False) as session, session.begin():
                spec = StopJob(work_item_id=f"github:{repo}#{i}", repo=repo, reason="bench")
                job = queue_job(session, f"bench:{i}", spec)
            assert job is not None, "a new key always queues a job"
            queued[job.id] = time.time()
            time.sleep(args.interval)
    deadline = time.time() + 30
    while len(got) < len(queued) and time.time() < deadline:
        time.sleep(0.05)
    elapsed = max(got.values(), default=started) - started
    stop.set()
    server.shutdown()
    state.engine.dispose()

    latencies = [(got[j] - queued[j]) * 1000 for j in queued if j in got]
    lost = len(queued) - len(latencies)
    mode = "remote producer" if args.remote_producer else "in-process producer"
    print(f"backend      {db_url.split(':')[0]}  ({args.spawners} spawners, {mode})")
    if not latencies:
        print("no job was handed over")
        return 1
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    verdict = "OK" if p99 <= TARGET_P99_MS else "MISSED"
    print(
        f"hand-over    p50 {p50:.1f} ms   p99 {p99:.1f} ms   max {max(latencies):.1f} ms"
        f"   (target p99 <= {TARGET_P99_MS:.0f} ms)  {verdict}"
    )
    print(f"throughput   {len(latencies) / elapsed:,.0f} jobs/s claimed and reported")
    print(f"completeness {len(latencies)} of {len(queued)} handed over, {lost} missing")
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
