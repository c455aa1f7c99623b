#!/usr/bin/env python3
"""End to end under a background load: label → checklist posted, execute → session launched.

The product as deployed, on one machine: `the-loop serve` (gunicorn asgi, 2 workers, inbox
workers on; SQLite, or with --postgres a fresh database on THE_LOOP_TEST_POSTGRES_URL's
server) talking to a fake GitHub on loopback, and `the-loop spawner` as its own process
(bubblewrap sandbox unless --sandbox none) launching a stand-in harness in tmux: spawnerkit's
`Stack(serve=True)`.

Background load: bench/webhook_load.py, a process of its own, sends signed
`issue_comment.created` deliveries (the published fixture, each with a delivery id and a body
of its own) at --rate per second paced by a clock, over 8 connections, on issue #1, which is
not a work item: each is routed to the handlers and does nothing. After --warmup seconds of
it, --items issues (#101 on) are released one at a time while it runs, each with a warm
checkout, and two spans are timed:
  label → checklist   the signed `issues.labeled` webhook sent → the checklist comment
                      created on the fake GitHub;
  execute → launched  the signed "the-loop execute" reply sent (once the item has recorded
                      its checklist) → the stand-in harness exec'd in its tmux pane.
Prints n, p50, p99 and max of each, the background sender's sent/acked counts, ack latency
(counted from when each delivery was due) and achieved rate, the deliveries still queued in
the inbox at the end, and the CPU time the hypervisor stole (/proc/stat) and the load
average over the measured window.
Target: p99 ≤ 2 s for both, with the background load at its rate. Exits 0 only when met.
Usage: bench/e2e.py [--items N] [--rate R] [--warmup S] [--postgres] [--sandbox bubblewrap|none]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import inbox_counts, steal, steal_percent
from spawnerkit import ROOT, SECRET, Stack, launched, percentile, summary, wait_until

from tests.support import POSTGRES_URL, scratch_database

TARGET_P99 = 2.0
FIRST_ITEM = 101  # the background load comments on the fixture's issue, #1
CONNECTIONS = 8
RATE_SHORTFALL = 0.95  # below this share of --rate the load was not the one asked for
WAIT_SECONDS = 30.0  # a span longer than this fails its item, and no item is released after
EXECUTE = "the-loop execute\n\n- [x] model-opus\n- [x] effort-high"


@dataclass
class Spans:
    checklist: list[float] = field(default_factory=list)
    launch: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@contextmanager
def background_load(url: str, rate: float, seconds: float, log: Path) -> Iterator[Any]:
    """bench/webhook_load.py against `url`, sending once it is ready; killed on the way out."""
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "webhook_load.py"),
                f"--url={url}",
                f"--rate={rate}",
                f"--connections={CONNECTIONS}",
                f"--seconds={seconds}",
            ],
            env={**os.environ, "BENCH_WEBHOOK_SECRET": SECRET},
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the background load did not start; see {log}")
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def stop_load(proc: Any) -> dict[str, float]:
    """Stop the background load; what it reports of the measured window."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def release_one(stack: Stack, number: int, spans: Spans) -> str | None:
    """Label issue `number` and reply execute, timing both spans; what did not happen in
    time, or None."""
    stack.warm_checkout(number)
    sent = time.time()
    stack.label(number)
    try:
        posted = wait_until(lambda: stack.checklist_on_github(number), WAIT_SECONDS, 0.005)
    except TimeoutError:
        return "no checklist"
    spans.checklist.append(posted - sent)
    try:
        wait_until(lambda: stack.checklist_posted(number), WAIT_SECONDS, 0.005)
    except TimeoutError:
        return "the item did not record its checklist"
    sent = time.time()
    stack.comment(number, EXECUTE)
    try:
        spans.launch.append(launched(stack, number, timeout=WAIT_SECONDS) - sent)
    except TimeoutError:
        return "no session launched"
    return None


def run_items(stack: Stack, items: int) -> Spans:
    """Release the items one at a time; after one fails the others are not released."""
    spans = Spans()
    for k, number in enumerate(range(FIRST_ITEM, FIRST_ITEM + items)):
        if (failure := release_one(stack, number, spans)) is not None:
            spans.failures.append(
                f"issue #{number}: {failure} within {WAIT_SECONDS:.0f} s; "
                f"the {items - k - 1} items after it were not released"
            )
            break
    return spans


@dataclass
class Window:
    """The machine and the inbox over the measured window."""

    seconds: float
    stolen: float  # percent of the CPU time
    load_average: float
    inbox_before: dict[str, int]
    inbox_after: dict[str, int]

    def finished_per_second(self) -> float:
        """Deliveries the inbox workers finished (done or parked) per second meanwhile."""
        before, after = self.inbox_before, self.inbox_after
        finished = sum(after.get(k, 0) - before.get(k, 0) for k in ("done", "parked"))
        return finished / max(1e-9, self.seconds)


def p99_met(seconds: list[float]) -> bool:
    return bool(seconds) and percentile(seconds, 0.99) <= TARGET_P99


def report(
    args: argparse.Namespace,
    spans: Spans,
    load: dict[str, float],
    window: Window,
) -> bool:
    """Print every figure; whether the target was met."""
    backend = "postgresql" if args.postgres else "sqlite"
    print(
        f"setup        {backend}, the-loop serve (gunicorn asgi x2 --threads 8, inbox workers "
        f"on), spawner sandbox {args.sandbox}; {args.items} items one at a time, warm "
        f"checkouts, after {args.warmup:g} s of background load"
    )
    for name, seconds in (
        ("label → checklist", spans.checklist),
        ("execute → launched", spans.launch),
    ):
        print(summary(name, seconds) if seconds else f"{name}: no figure")
    for failure in spans.failures:
        print(f"failed       {failure}")
    print(
        f"background   issue_comment.created on issue #1 at {args.rate:g}/s asked, {CONNECTIONS} "
        f"connections: sent {load['sent']:.0f}, acked {load['acked']:.0f} (202), "
        f"{load['other']:.0f} other, {load['errors']:.0f} errors; ack latency p50 "
        f"{load['p50_ms']:.1f} ms p99 {load['p99_ms']:.1f} ms max {load['max_ms']:.1f} ms; "
        f"achieved {load['rate']:.1f}/s over {load['seconds']:.1f} s"
    )
    before, after = window.inbox_before, window.inbox_after
    print(
        f"inbox        {before.get('queued', 0)} deliveries queued at the start of the measured "
        f"window, {after.get('queued', 0)} at its end; the inbox workers finished "
        f"{window.finished_per_second():.1f}/s meanwhile ({after.get('done', 0)} done, "
        f"{after.get('parked', 0)} parked in all)"
    )
    print(
        f"machine      {os.cpu_count()} CPUs, steal {window.stolen:.1f}% over the measured "
        f"window of {window.seconds:.1f} s (/proc/stat), load average "
        f"{window.load_average:.1f} at its end"
    )
    loaded = load["rate"] >= RATE_SHORTFALL * args.rate and not load["errors"]
    ok = not spans.failures and p99_met(spans.checklist) and p99_met(spans.launch) and loaded
    why = "" if loaded else " (the background load fell short of its rate)"
    print(f"targets p99 ≤ {TARGET_P99:g} s: {'met' if ok else 'MISSED'}{why}")
    return ok


def measure(args: argparse.Namespace, database_url: str | None) -> bool:
    bound = args.warmup + args.items * 3 * WAIT_SECONDS + 60  # the load stops by itself
    with ExitStack() as resources:
        stack = resources.enter_context(
            Stack(serve=True, database_url=database_url, sandbox=args.sandbox)
        )
        log = stack.tmp / "webhook_load.log"
        load = resources.enter_context(background_load(stack.url, args.rate, bound, log))
        time.sleep(args.warmup)
        load.send_signal(signal.SIGUSR1)
        started, before, inbox = time.monotonic(), steal(), inbox_counts(stack.database_url)
        spans = run_items(stack, args.items)
        window = Window(
            seconds=time.monotonic() - started,
            stolen=steal_percent(before, steal()),
            load_average=os.getloadavg()[0],
            inbox_before=inbox,
            inbox_after=inbox_counts(stack.database_url),
        )
        background = stop_load(load)
    return report(args, spans, background, window)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=30, help="issues released, one at a time")
    parser.add_argument("--rate", type=float, default=200.0, help="background deliveries/s")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of load first")
    parser.add_argument(
        "--postgres", action="store_true", help="a fresh database on THE_LOOP_TEST_POSTGRES_URL"
    )
    parser.add_argument("--sandbox", choices=["bubblewrap", "none"], default="bubblewrap")
    args = parser.parse_args()
    if args.postgres and not POSTGRES_URL:
        print("--postgres needs THE_LOOP_TEST_POSTGRES_URL", file=sys.stderr)
        return 2
    with ExitStack() as resources:
        database_url = None
        if args.postgres:
            scratch = scratch_database("postgres", Path(tempfile.gettempdir()))
            database_url = resources.enter_context(scratch)
        return 0 if measure(args, database_url) else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
