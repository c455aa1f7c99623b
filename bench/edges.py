#!/usr/bin/env python3
"""The App's doors under strangers' traffic: slow bodies and a flood of forged webhooks.

Starts `the-loop serve` (gunicorn's asgi worker; `--front gthread`: the App as plain WSGI,
`gunicorn -k gthread --threads N 'app.runtime:create_app()'`) on a fresh SQLite store, then:

1. opens --slow connections that announce a body and send one byte of it (authenticated
   spawner calls, Slack requests with fresh signature headers, webhooks), and while they
   wait times `/healthz` and a spawner claim (`GET /spawner/v1/jobs?wait=0` with a job
   queued) --samples times each: target p99 < 1 s;
2. holds --held unsigned webhooks open, each declaring --held-mib MiB and sending all of it
   but the last byte, and reads the App worker's memory from /proc (target: it grows by at
   most 64 MiB) and times `/healthz` meanwhile (target p99 < 1 s);
3. sends --forged webhooks with a wrong signature and 8 KB header values over a few
   connections, and measures what the database (WAL folded in) and events.jsonl grew by,
   after the App has shut down and written its last summary: target < 1 MB for 100,000.
4. (with --idle N) opens N connections that send nothing and times `/healthz` meanwhile
   (target p99 < 1 s).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.fleet.tokens import create_token  # noqa: E402
from app.protocol import StopJob  # noqa: E402
from app.store.engines import make_engine  # noqa: E402
from app.store.jobqueue import queue_job  # noqa: E402
from app.store.tables import WorkItem, WorkItemStatus  # noqa: E402
from tests.support import forked_workers, hold_open_bodies, memory_kib  # noqa: E402

TARGET_MS = 1000.0
TARGET_GROWTH = 1024 * 1024
TARGET_HELD_KIB = 64 * 1024
REPO = "bench/edges.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    tmp: Path, front: str = "serve", threads: int = 32
) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GITHUB_WEBHOOK_SECRET": "bench-secret",
        "DATABASE_URL": f"sqlite:///{tmp / 'the-loop.db'}",
        "THE_LOOP_STATE_DIR": str(tmp),
        "THE_LOOP_CONFIG": str(tmp / "none.yaml"),
        "PORT": str(port),
    }
    command = ["-m", "app.cli", "serve", "--workers", "1"]
    if front == "gthread":
        command = ["-m", "gunicorn", "-k", "gthread", "--threads", str(threads)]
        command += ["--bind", f"127.0.0.1:{port}", "app.runtime:create_app()"]
    server = subprocess.Popen(
        [sys.executable, *command],
        cwd=tmp,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return server, url, env
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the App did not start")


def seed(env: dict[str, str], jobs: int) -> str:
    """A spawner token and `jobs` stop jobs for it to claim."""
    engine = make_engine(env["DATABASE_URL"])
    from sqlalchemy.orm import Session

    with Session(engine) as db, db.begin():
        token = create_token(db, "bench", [REPO])
        for n in range(jobs):
            item = f"github:{REPO}#{n + 1}"
            db.add(
                WorkItem(
                    id=item, repo_full_name=REPO, issue_number=n + 1, state=WorkItemStatus.RUNNING
                )
            )
            db.flush()
            queue_job(db, f"stop:bench-{n}", StopJob(work_item_id=item, repo=REPO, reason="bench"))
    engine.dispose()
    return token


def slow(url: str, token: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    stamp = str(int(time.time()))
    doors = [
        ("/spawner/v1/events", f"Authorization: Bearer {token}"),
        (
            "/slack/events",
            f"X-Slack-Signature: v0={'0' * 64}\r\nX-Slack-Request-Timestamp: {stamp}",
        ),
        ("/github/webhooks", "X-GitHub-Event: issues"),
    ]
    socks = []
    for n in range(count):
        path, extra = doors[n % len(doors)]
        sock = socket.create_connection((host, int(port)))
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\nContent-Length: 4096\r\n\r\n"
        sock.sendall(head.encode() + b"{")
        socks.append(sock)
    return socks


def timed(call: object, samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        started = time.monotonic()
        with contextlib.suppress(httpx.HTTPError):  # unanswered: counted as its timeout
            call()  # type: ignore[operator]
        out.append((time.monotonic() - started) * 1000)
    return out


def forge(url: str, count: int, connections: int) -> float:
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"POST /github/webhooks HTTP/1.1\r\nHost: {host}\r\nX-GitHub-Event: {'e' * 8000}\r\n"
        f"X-GitHub-Delivery: {'d' * 8000}\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()

    def one(n: int) -> None:
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            for _ in range(n):
                sock.sendall(request)
                seen = b""
                while b'"signature does not match"}' not in seen:
                    seen += sock.recv(65536)

    threads = [
        threading.Thread(target=one, args=(count // connections,)) for _ in range(connections)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


def hold(
    url: str, arbiter: int, count: int, mib: int, samples: int
) -> tuple[int, int, list[float]]:
    """The worker's RSS before and at its peak (KiB) while `count` bodies are held open, and
    `/healthz` timed meanwhile."""
    worker = forked_workers(arbiter)[0]
    before = memory_kib(worker)
    socks = hold_open_bodies(url, "/github/webhooks", count, mib * 1024 * 1024)
    try:
        health = timed(lambda: httpx.get(f"{url}/healthz", timeout=30), samples)
        peak = memory_kib(worker, "VmHWM")
    finally:
        for s in socks:
            s.close()
    return before, peak, health


def idle(url: str, count: int, samples: int) -> list[float]:
    """`/healthz` timed while `count` connections are open and send nothing (a probe that
    gets no answer counts as its 30 s timeout)."""
    host, port = url.removeprefix("http://").split(":")
    socks = [socket.create_connection((host, int(port)), timeout=30) for _ in range(count)]
    try:
        time.sleep(0.5)
        times = []
        for _ in range(samples):
            started = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/healthz", timeout=30)
            times.append((time.monotonic() - started) * 1000)
        return times
    finally:
        for sock in socks:
            sock.close()


def store_size(tmp: Path) -> int:
    db = tmp / "the-loop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    jsonl = tmp / "events.jsonl"
    return db.stat().st_size + (jsonl.stat().st_size if jsonl.exists() else 0)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slow", type=int, default=64, help="slow-body connections")
    parser.add_argument("--samples", type=int, default=50, help="timed calls of each kind")
    parser.add_argument("--held", type=int, default=30, help="large unsigned bodies held open")
    parser.add_argument("--held-mib", type=int, default=24, help="each held body's size")
    parser.add_argument("--forged", type=int, default=100_000, help="forged webhooks")
    parser.add_argument("--connections", type=int, default=4, help="for the forged webhooks")
    parser.add_argument("--front", choices=("serve", "gthread"), default="serve")
    parser.add_argument("--threads", type=int, default=32, help="gthread's threads")
    parser.add_argument("--idle", type=int, default=0, help="idle connections held open")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="the-loop-bench-edges-"))
    server, url, env = start(tmp, args.front, args.threads)
    idle_health: list[float] = []
    try:
        token = seed(env, args.samples)
        socks = slow(url, token, args.slow)
        time.sleep(0.5)
        health = timed(lambda: httpx.get(f"{url}/healthz", timeout=30), args.samples)
        bearer = {"Authorization": f"Bearer {token}"}
        claims = timed(
            lambda: httpx.get(f"{url}/spawner/v1/jobs?wait=0", headers=bearer, timeout=30),
            args.samples,
        )
        still_open = sum(unanswered(s) for s in socks)
        for s in socks:
            s.close()
        rss_before, rss_peak, held_health = hold(
            url, server.pid, args.held, args.held_mib, args.samples
        )
        before = store_size(tmp)
        seconds = forge(url, args.forged, args.connections)
        if args.idle:
            idle_health = idle(url, args.idle, args.samples)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a front still waiting on a client's thread
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
    grown = store_size(tmp) - before
    shutil.rmtree(tmp, ignore_errors=True)
    ok_health, ok_claim = p99(health) < TARGET_MS, p99(claims) < TARGET_MS
    print(f"slow bodies  {args.slow} open ({still_open} still waiting when the timing ended)")
    print(
        f"/healthz     p50 {statistics.median(health):.0f} ms  p99 {p99(health):.0f} ms  "
        f"(target p99 < {TARGET_MS:.0f} ms)  {'OK' if ok_health else 'MISSED'}"
    )
    print(
        f"claim        p50 {statistics.median(claims):.0f} ms  p99 {p99(claims):.0f} ms  "
        f"(target p99 < {TARGET_MS:.0f} ms)  {'OK' if ok_claim else 'MISSED'}"
    )
    ok_held = rss_peak - rss_before <= TARGET_HELD_KIB and p99(held_health) < TARGET_MS
    print(
        f"held bodies  {args.held} x {args.held_mib} MiB: worker RSS {rss_before >> 10} MiB, "
        f"peak {rss_peak >> 10} MiB (+{(rss_peak - rss_before) >> 10}, target <= "
        f"{TARGET_HELD_KIB >> 10}); /healthz p50 {statistics.median(held_health):.0f} ms  "
        f"p99 {p99(held_health):.0f} ms  {'OK' if ok_held else 'MISSED'}"
    )
    ok_growth = grown < TARGET_GROWTH
    print(
        f"forged       {args.forged:,} in {seconds:.1f} s ({args.forged / seconds:,.0f}/s): "
        f"database + events.jsonl grew {grown:,} bytes (target < {TARGET_GROWTH:,})  "
        f"{'OK' if ok_growth else 'MISSED'}"
    )
    ok_idle = not idle_health or p99(idle_health) < TARGET_MS
    if idle_health:
        print(
            f"idle         {args.idle} connections: /healthz p50 "
            f"{statistics.median(idle_health):.0f} ms  p99 {p99(idle_health):.0f} ms  "
            f"(target p99 < {TARGET_MS:.0f} ms)  {'OK' if ok_idle else 'MISSED'}"
        )
    return 0 if ok_health and ok_claim and ok_held and ok_growth and ok_idle else 1


def unanswered(sock: socket.socket) -> bool:
    """True while the server has sent nothing on `sock` (nor closed it)."""
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    return False


if __name__ == "__main__":
    sys.exit(main())
