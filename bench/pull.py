#!/usr/bin/env python3
"""Reading webhooks from GitHub's delivery log, against the fake GitHub on loopback.

1. Pull mode: `the-loop serve` with THE_LOOP_INGRESS=pull at --interval seconds (default 2,
   the App's default) on a fresh SQLite store; --issues times (default 20) GitHub logs an
   `issues.labeled` it could not deliver, and the time until the App's checklist comment
   appears on that issue is taken. Each delivery comes at a random moment of the polling
   cycle. Prints p50 and p99 against the targets (p50 <= 3 s, p99 <= 5 s at 2 s).
2. Reconciling: --missed deliveries (default 1,000) GitHub failed to send while the App was
   down; one pass (`the-loop inbox --reconcile`'s) over a fresh store. Prints its time and
   the requests it spent on the log (listings and payloads).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchkit import free_port, percentile  # noqa: E402

from tests.fakes.github_api import FakeGitHub, generate_private_key_pem  # noqa: E402
from tests.fakes.server import LiveServer  # noqa: E402
from tests.fault_support import REPO, labeled_body  # noqa: E402
from tests.support import APP_ID, app_env, healthy  # noqa: E402

TARGET_P50, TARGET_P99 = 3.0, 5.0


def pull_latencies(
    directory: Path, fake: FakeGitHub, env: dict[str, str], issues: int, interval: float
) -> list[float]:
    port = free_port()
    log = directory / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--workers", "1"],
        cwd=ROOT,
        env={
            **os.environ,
            **env,
            "PYTHONPATH": str(ROOT),
            "PORT": str(port),
            "THE_LOOP_INGRESS": "pull",
            "THE_LOOP_PULL_SECONDS": str(interval),
        },
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    latencies = []
    try:
        deadline = time.monotonic() + 60
        while not healthy(f"http://127.0.0.1:{port}"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the-loop serve did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        for n in range(1, issues + 1):
            time.sleep(random.uniform(0, interval))  # a random moment of the polling cycle
            started = time.monotonic()
            fake.hook_log.deliver("issues", json.loads(labeled_body(n)), url=None)
            while not fake.issue_comments(REPO, n):
                if time.monotonic() - started > 60:
                    raise SystemExit(
                        f"issue {n}: no checklist after 60 s:\n{log.read_text()[-2000:]}"
                    )
                time.sleep(0.005)
            latencies.append(time.monotonic() - started)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return latencies


def reconcile_missed(fake: FakeGitHub, env: dict[str, str], missed: int) -> None:
    from app.audit import EventLog
    from app.config.process_settings import load_settings
    from app.github.client import GitHubApp
    from app.github.ingest import IngestWriter
    from app.github.reconcile import Reconciler
    from app.github.services import utcnow
    from app.runtime.event_routes import build_router
    from app.store.engines import make_engine, migrate

    for n in range(1, missed + 1):
        fake.hook_log.deliver("issues", json.loads(labeled_body(n)), url=None)
    settings = load_settings(env, dotenv=None)
    engine = make_engine(settings.database_url)
    migrate(engine)
    events = EventLog(settings.events_path, engine)
    ingest = IngestWriter(engine, events, build_router().routes)
    reconciler = Reconciler(
        settings, engine, GitHubApp(settings), ingest, events, utcnow, one_pass=True
    )
    before = len(fake.requests)
    started = time.monotonic()
    counts = reconciler.run_pass()
    elapsed = time.monotonic() - started
    ingest.close()
    engine.dispose()
    assert counts is not None
    seen = fake.requests[before:]
    listings = sum(1 for r in seen if r.path == "/app/hook/deliveries")
    payloads = sum(1 for r in seen if r.path.startswith("/app/hook/deliveries/"))
    print(
        f"reconcile: {counts.recovered} of {missed} missed deliveries recovered in {elapsed:.1f} s "
        f"({counts.recovered / elapsed:.0f}/s); {counts.requests} requests to the log "
        f"({listings} listings of 100, {payloads} payloads); complete={counts.complete}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--issues", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--missed", type=int, default=1000)
    parser.add_argument("--only", choices=("pull", "reconcile"))
    args = parser.parse_args()
    key = generate_private_key_pem()
    directory = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    try:
        if args.only in (None, "pull"):
            fake = FakeGitHub(app_id=APP_ID, private_key_pem=key)
            with LiveServer(fake.wsgi()) as github:
                where = directory / "pull"
                where.mkdir()
                env = app_env(where, f"sqlite:///{where / 'the-loop.db'}", github.url, key)
                found = pull_latencies(where, fake, env, args.issues, args.interval)
            p50, p99 = percentile(found, 0.5), percentile(found, 0.99)
            verdict = "met" if p50 <= TARGET_P50 and p99 <= TARGET_P99 else "MISSED"
            print(
                f"pull mode every {args.interval:g} s: label -> checklist over {len(found)} "
                f"issues p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(found):.2f} s "
                f"(targets p50 <= {TARGET_P50:g} s, p99 <= {TARGET_P99:g} s: {verdict})"
            )
        if args.only in (None, "reconcile"):
            fake = FakeGitHub(app_id=APP_ID, private_key_pem=key)
            with LiveServer(fake.wsgi()) as github:
                where = directory / "reconcile"
                where.mkdir()
                env = app_env(where, f"sqlite:///{where / 'the-loop.db'}", github.url, key)
                reconcile_missed(fake, env, args.missed)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
