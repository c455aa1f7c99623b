#!/usr/bin/env python3
"""Webhook ingest benchmark: signed deliveries of a real fixture at a running App.

Starts `the-loop serve` (gunicorn's asgi worker, inbox workers on) on a fresh SQLite store (or
--database-url), warms it up with --warmup seconds of the same load, then drives it with wrk
at 20 connections for --seconds and checks every acknowledged delivery is in the inbox.
Each request carries a body of its own (the fixture with a `bench_n` field spliced in, signed
beforehand): the App stores a signed body once, whatever its delivery id says.
Prints throughput and p50/p99 acknowledgement latency of the measured run against the
targets. `--fixture` picks the delivery: the default, issues.opened, is one no handler acts
on (stored as done); issue_comment.created also goes through the worker's handlers.

`--postgres --replicas 2`: a fresh database on THE_LOOP_TEST_POSTGRES_URL's server, two
`the-loop serve` processes on ports of their own (inbox workers off) and one `the-loop
worker`, with one wrk process per replica sharing the connections (default 50). Its p99 is
the worse of the replicas' p99s. Replicas sharing one machine share its cores: each gets
`--workers` of cores / replicas (at least 1), as the README's deployment section says.
On PostgreSQL a connection of the bench's own commits one row every 20 ms over the
measured run and prints its commit latency (`CommitProbe`): a stall in both at once is the
database's, not the App's.
The machine's steal time over the measured run is printed.

`--routed` is the common case under a flood: signed `issue_comment.created` deliveries that
route to handlers, the inbox workers handling them while wrk sends, 30 s measured, against
the routed targets (>= 2,000/s, p99 <= 25 ms). After the run it waits for the workers to
finish the inbox and says how many deliveries were handled, parked or still queued, and how
often the server logged "database is locked". Every run prints the CPU time the hypervisor
stole from this machine during the measured run (/proc/stat), which the figures depend on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from githubkit.webhooks import sign
from sqlalchemy import create_engine, func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from benchkit import (  # noqa: E402
    CommitProbe,
    free_port,
    inbox_counts,
    splice,
    start_process,
    steal,
    steal_percent,
    wait_healthy,
)

from app.store.tables import Delivery  # noqa: E402
from tests.support import POSTGRES_URL, scratch_database  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "github"
FIXTURE = FIXTURES / "issues.opened.json"
ROUTED_FIXTURE = FIXTURES / "issue_comment.created.json"
TARGET_P99_MS = 25.0
TARGET_P99_MS_POSTGRES = 50.0
TARGET_RPS = 1500.0
TARGET_ROUTED_RPS = 2000.0
DRAIN_SECONDS = 120
PER_THREAD = 80_000  # distinct bodies per wrk thread and run (2 threads; warm-up, measured)


def signed_variants(
    fixture: Path, secret: str, tmp: Path, per_thread: int, wrks: int = 1
) -> dict[str, str]:
    """The fixture as `prefix + n + suffix` (a field of its own per request) and the
    signature of each n, for two runs of `wrks` wrk processes of two threads: the App
    stores a body once."""
    prefix, suffix = splice(fixture)
    (tmp / "prefix").write_bytes(prefix)
    (tmp / "suffix").write_bytes(suffix)
    with (tmp / "signatures").open("w") as out:
        for n in range(4 * wrks * per_thread):
            out.write(sign(secret, prefix + str(n).encode() + suffix) + "\n")
    return {
        **os.environ,
        "INGEST_PREFIX": str(tmp / "prefix"),
        "INGEST_SUFFIX": str(tmp / "suffix"),
        "INGEST_SIGNATURES": str(tmp / "signatures"),
        "INGEST_PER_THREAD": str(per_thread),
        "INGEST_EVENT": fixture.name.split(".", 1)[0],
    }


def run_wrks(
    urls: list[str], connections: int, seconds: int, env: dict[str, str], run: int
) -> dict[str, int]:
    """One wrk process per URL at once, the connections shared out; run `run` (0 warm-up,
    1 measured) uses bodies of its own. Counts add up; latencies are the worst of them."""
    per_wrk = 2 * PER_THREAD
    envs = [
        {**env, "INGEST_OFFSET": str((run * len(urls) + i) * per_wrk), "INGEST_ID": f"{run}{i}-"}
        for i in range(len(urls))
    ]
    shares = [connections // len(urls) + (i < connections % len(urls)) for i in range(len(urls))]
    with ThreadPoolExecutor(len(urls)) as pool:
        results = list(pool.map(run_wrk, urls, shares, [seconds] * len(urls), envs))
    total = {key: sum(r[key] for r in results) for key in ("requests", "non2xx", "socket_errors")}
    worst = {
        key: max(r[key] for r in results) for key in ("duration_us", "p50_us", "p99_us", "max_us")
    }
    return {**total, **worst}


def probe_commits(db_url: str) -> CommitProbe | contextlib.nullcontext[None]:
    """PostgreSQL's own commit latency over the measured run (`CommitProbe`). On SQLite a
    probe would be one more writer queueing for the App's write lock, so none runs."""
    return CommitProbe(db_url) if db_url.startswith("postgresql") else contextlib.nullcontext()


def drain(db_url: str, seconds: float) -> tuple[dict[str, int], float]:
    """Wait for the inbox workers to finish what was acknowledged; the states and the time."""
    started = time.monotonic()
    while True:
        counts = inbox_counts(db_url)
        if not counts.get("queued") or time.monotonic() - started > seconds:
            return counts, time.monotonic() - started
        time.sleep(0.5)


def run_wrk(url: str, connections: int, seconds: int, env: dict[str, str]) -> dict[str, int]:
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout",
            "5s",
            "-s",
            str(ROOT / "bench" / "ingest.lua"),
            url,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("JSON "))
    result: dict[str, int] = json.loads(line[5:])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, help="measured seconds (10; 30 with --routed)")
    parser.add_argument("--connections", type=int, help="default 20; 50 with --replicas > 1")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of load not measured")
    parser.add_argument(
        "--workers", type=int, help="gunicorn workers per replica (default: cores / replicas)"
    )
    parser.add_argument("--threads", type=int, default=8, help="Flask threads per worker")
    parser.add_argument("--replicas", type=int, default=1, help="`the-loop serve` processes")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument(
        "--postgres", action="store_true", help="a fresh database on THE_LOOP_TEST_POSTGRES_URL"
    )
    parser.add_argument("--fixture", type=Path, help=f"default {FIXTURE.name}")
    parser.add_argument(
        "--routed", action="store_true", help="issue_comment.created, handled while it arrives"
    )
    args = parser.parse_args()
    connections = args.connections or (50 if args.replicas > 1 else 20)
    args.workers = args.workers or max(1, (os.cpu_count() or 2) // args.replicas)
    args.fixture = args.fixture or (ROUTED_FIXTURE if args.routed else FIXTURE)
    args.seconds = args.seconds or (30 if args.routed else 10)

    tmp = Path(tempfile.mkdtemp(prefix="the-loop-bench-"))
    os.sync()  # start with no other run's writes still going to disk
    with ExitStack() as stack:
        if args.postgres:
            if not POSTGRES_URL:
                print("--postgres needs THE_LOOP_TEST_POSTGRES_URL", file=sys.stderr)
                return 2
            db_url = stack.enter_context(scratch_database("postgres", tmp))
        else:
            db_url = args.database_url or f"sqlite:///{tmp / 'the-loop.db'}"
        return measure(args, connections, db_url, tmp)
    return 1


def measure(args: argparse.Namespace, connections: int, db_url: str, tmp: Path) -> int:
    secret = "bench-secret"
    env = {
        **os.environ,
        "GITHUB_WEBHOOK_SECRET": secret,
        "DATABASE_URL": db_url,
        "THE_LOOP_STATE_DIR": str(tmp),
        "THE_LOOP_CONFIG": str(tmp / "none.yaml"),
    }
    # One replica runs its own inbox workers; several leave them to one `the-loop worker`.
    serve_env = {**env, "THE_LOOP_INBOX_WORKERS": "0"} if args.replicas > 1 else env
    procs, urls = [], []
    for _ in range(args.replicas):
        port = free_port()
        serve = ["serve", "--workers", str(args.workers), "--threads", str(args.threads)]
        procs.append(start_process(serve, {**serve_env, "PORT": str(port)}, tmp))
        urls.append(f"http://127.0.0.1:{port}")
    if args.replicas > 1:
        procs.append(start_process(["worker"], {**env, "THE_LOOP_INBOX_WORKERS": "2"}, tmp))
    try:
        if not all(wait_healthy(url) for url in urls):
            print("server did not start", file=sys.stderr)
            return 1
        wrk_env = signed_variants(args.fixture, secret, tmp, PER_THREAD, len(urls))
        if args.warmup > 0:
            warm = run_wrks(urls, connections, args.warmup, wrk_env, run=0)
            warmup_acked = warm["requests"] - warm["non2xx"]
        else:
            warmup_acked = 0
        steal_before = steal()
        with probe_commits(db_url) as probe:
            result = run_wrks(urls, connections, args.seconds, wrk_env, run=1)
        steal_after = steal()
        load = os.getloadavg()[0]
        states, drained_in = drain(db_url, DRAIN_SECONDS) if args.routed else ({}, 0.0)
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)

    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(Delivery)).scalar_one()
    engine.dispose()
    logs = [path.read_text(errors="replace") for path in tmp.glob("server-*.log")]
    locked = sum(log.count("database is locked") for log in logs)
    shutil.rmtree(tmp, ignore_errors=True)
    rps = result["requests"] / (result["duration_us"] / 1e6)
    p50, p99 = result["p50_us"] / 1000, result["p99_us"] / 1000
    acked = result["requests"] - result["non2xx"] + warmup_acked
    target_p99 = TARGET_P99_MS_POSTGRES if db_url.startswith("postgresql") else TARGET_P99_MS
    target_rps = TARGET_ROUTED_RPS if args.routed else TARGET_RPS
    stolen = steal_percent(steal_before, steal_after)
    replicas = f"{args.replicas} replicas + a worker, " if args.replicas > 1 else ""
    print(
        f"backend      {db_url.split(':')[0]}  ({replicas}gunicorn asgi x{args.workers} "
        f"--threads {args.threads}, {connections} connections, {args.warmup}s warm-up + "
        f"{args.seconds}s measured, fixture {args.fixture.name}"
        f"{', routed, inbox workers on' if args.routed else ''})"
    )
    print(
        f"machine      {os.cpu_count()} CPUs, steal {stolen:.1f}% during the measured run "
        "(/proc/stat), "
        f"load average {load:.1f} at its end (other processes share the CPUs)"
    )
    print(
        f"throughput   {rps:,.0f} deliveries/s   (target >= {target_rps:,.0f})  "
        f"{'OK' if rps >= target_rps else 'MISSED'}"
    )
    print(
        f"ack latency  p50 {p50:.1f} ms   p99 {p99:.1f} ms   max {result['max_us'] / 1000:.1f} ms"
        f"   (target p99 <= {target_p99:.0f} ms)  {'OK' if p99 <= target_p99 else 'MISSED'}"
    )
    print(
        f"durability   {acked} acknowledged (warm-up included), {stored} stored in the inbox, "
        f"{result['non2xx']} non-2xx, {result['socket_errors']} socket errors"
    )
    if probe is not None:
        print(f"db commits   {probe.summary()}")
    if args.routed:
        print(
            f"handled      {states.get('done', 0)} done, {states.get('parked', 0)} parked, "
            f"{states.get('queued', 0)} still queued {drained_in:.1f} s after the run; "
            f'"database is locked" logged {locked} times'
        )
    duplicates = max(0, acked - stored)
    if duplicates:
        print(f"             ({duplicates} acknowledged as repeats: raise PER_THREAD)")
    handled_ok = not args.routed or (not states.get("parked") and not locked)
    return 0 if stored >= acked and handled_ok else 1


if __name__ == "__main__":
    sys.exit(main())
