#!/usr/bin/env python3
"""Retention on a big store: ack latency before and while a prune runs.

Fills a fresh SQLite store (or --database-url) with --rows deliveries (default 1,000,000) of
the real issue_comment.created body: 90 % done 9 to 30 days ago (their rows go), 5 % done
7.5 days ago (their bodies go), the rest done today, and 1,000 parked a year ago (never
pruned). Then starts `the-loop serve` (periodic prune off), sends signed deliveries with wrk
(20 connections) for --seconds, starts `the-loop inbox --prune` and sends for --seconds again
while it runs. Prints throughput and p50/p99/max acknowledgement latency of both windows, the
prune's duration and what it removed, how often a write held the SQLite write lock past
SLOW_HOLD (250 ms; every webhook waited), and the CPU time stolen from the machine.

`--cold` empties the kernel's page cache (root: /proc/sys/vm/drop_caches) before each window,
as on a store much larger than memory or a machine that pages out cold file pages: every
index page a write needs first comes from the disk.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, insert, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from benchkit import steal, steal_percent  # noqa: E402

from app.github.services import utcnow  # noqa: E402
from app.store.engines import make_engine, migrate  # noqa: E402
from app.store.sqlite_writes import SLOW_HOLD  # noqa: E402
from app.store.tables import Delivery, InboxState, compress_body  # noqa: E402


def _ingest_bench() -> Any:
    """bench/ingest.py's wrk driver, signing and /proc/stat helpers (one owner)."""
    loader = importlib.machinery.SourceFileLoader("bench_ingest", str(ROOT / "bench" / "ingest"))
    spec = importlib.util.spec_from_loader("bench_ingest", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


ingest = _ingest_bench()
TARGET_P99_MS = 25.0
CHUNK = 10_000
PARKED = 1_000
PER_WINDOW = 30_000  # distinct bodies per wrk thread and window


def fill(db_url: str, rows: int) -> float:
    """Insert `rows` deliveries with executemany, oldest first; returns the seconds it took.
    Its chunks hold the write lock for long on purpose, with nobody waiting: not reported."""
    logging.getLogger("app.store.sqlite_writes").setLevel(logging.ERROR)
    engine = make_engine(db_url)
    migrate(engine)
    body = compress_body(ingest.ROUTED_FIXTURE.read_bytes())
    now = utcnow()
    old, body_old = int(rows * 0.90), int(rows * 0.05)
    started = time.monotonic()

    def row(n: int, state: str, age: timedelta) -> dict[str, Any]:
        at = now - age
        return {
            "delivery_id": f"fill-{n}",
            "event": "issue_comment",
            "action": "created",
            "body": body,
            "body_sha256": hashlib.sha256(b"%d" % n).hexdigest(),
            "state": state,
            "attempts": 1,
            "next_attempt_at": at,
            "received_at": at,
            "done_at": at if state == InboxState.DONE else None,
        }

    def age_of(n: int) -> timedelta:
        if n < old:  # oldest first: 30 days down to 9
            return timedelta(days=30) - timedelta(days=21) * (n / old)
        if n < old + body_old:
            return timedelta(days=7.5)
        return timedelta(hours=1)

    with engine.begin() as conn:
        conn.execute(
            insert(Delivery),
            [row(-n - 1, InboxState.PARKED, timedelta(days=365)) for n in range(PARKED)],
        )
    for start in range(0, rows, CHUNK):
        end = min(rows, start + CHUNK)
        with engine.begin() as conn:
            conn.execute(
                insert(Delivery),
                [row(n, InboxState.DONE, age_of(n)) for n in range(start, end)],
            )
    engine.dispose()
    return time.monotonic() - started


def count_rows(db_url: str) -> int:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(Delivery)).scalar_one())
    finally:
        engine.dispose()


def figures(name: str, result: dict[str, int]) -> str:
    rps = result["requests"] / (result["duration_us"] / 1e6)
    p50, p99 = result["p50_us"] / 1000, result["p99_us"] / 1000
    verdict = "OK" if p99 <= TARGET_P99_MS else "MISSED"
    return (
        f"{name:<14}{rps:,.0f} deliveries/s   p50 {p50:.1f} ms   p99 {p99:.1f} ms   "
        f"max {result['max_us'] / 1000:.1f} ms   {result['non2xx']} non-2xx   "
        f"(target p99 <= {TARGET_P99_MS:.0f} ms) {verdict}"
    )


SLOW_HOLD_LINE = "SQLite write lock held"  # how app.store.sqlite_writes logs a hold past SLOW_HOLD


def drop_page_cache() -> None:
    """Write back and drop the kernel's clean page cache (needs root)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=15, help="each measured window")
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument(
        "--cold", action="store_true", help="empty the page cache before each window"
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="the-loop-bench-retention-"))
    db_url = args.database_url or f"sqlite:///{tmp / 'the-loop.db'}"
    filled_in = fill(db_url, args.rows)
    os.sync()
    secret, port = "bench-secret", ingest.free_port()
    env = {
        **os.environ,
        "GITHUB_WEBHOOK_SECRET": secret,
        "DATABASE_URL": db_url,
        "THE_LOOP_STATE_DIR": str(tmp),
        "THE_LOOP_CONFIG": str(tmp / "none.yaml"),
        "THE_LOOP_PRUNE_INTERVAL": "0",  # the prune this bench starts is the only one
        "PORT": str(port),
        "PYTHONPATH": str(ROOT),
    }
    with (tmp / "serve.log").open("wb") as serve_log:  # the server keeps its own copy
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--workers", str(args.workers)],
            cwd=tmp,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=serve_log,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                print("server did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        wrk_env = ingest.signed_variants(ingest.FIXTURE, secret, tmp, ingest.PER_THREAD)
        ingest.run_wrk(url, args.connections, 3, {**wrk_env, "INGEST_OFFSET": "0"})  # warm-up
        cpu = steal()
        if args.cold:
            drop_page_cache()
        before = ingest.run_wrk(
            url, args.connections, args.seconds, wrk_env | {"INGEST_OFFSET": "0"}
        )
        if args.cold:
            drop_page_cache()
        pruning_started = time.monotonic()
        prune = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "inbox", "--prune"],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        offset = str(2 * ingest.PER_THREAD)
        during = ingest.run_wrk(
            url, args.connections, args.seconds, wrk_env | {"INGEST_OFFSET": offset}
        )
        still_running, load = prune.poll() is None, os.getloadavg()[0]
        prune_out, _ = prune.communicate(timeout=3600)
        pruned_in = time.monotonic() - pruning_started
        stolen = steal_percent(cpu, steal())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    left = count_rows(db_url)
    slow = (tmp / "serve.log").read_text(errors="replace").count(SLOW_HOLD_LINE)
    slow_prune = prune_out.count(SLOW_HOLD_LINE)
    shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"store         {args.rows:,} deliveries + {PARKED:,} parked, filled in {filled_in:.0f} s "
        f"({db_url.split(':')[0]}, gunicorn asgi x{args.workers}, {args.connections} connections, "
        f"{args.seconds} s windows{', page cache emptied before each' if args.cold else ''})"
    )
    print(
        f"machine       {os.cpu_count()} CPUs, steal {stolen:.1f}% during the windows, "
        f"load average {load:.1f} at their end (other processes share the CPUs)"
    )
    print(figures("before prune", before))
    print(figures("during prune", during))
    print(
        f"slow holds    write lock held > {SLOW_HOLD * 1000:.0f} ms: "
        f"{slow} by the App, {slow_prune} by the prune"
    )
    window = "the whole window" if still_running else "part of the window"
    print(f"prune         took {pruned_in:.1f} s (running for {window}); {left:,} rows left")
    print(prune_out.rstrip())
    return 0 if prune.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
