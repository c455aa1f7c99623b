#!/usr/bin/env python3
"""Fault scenarios at full size: App replicas, inbox workers and spawners as real processes
on one PostgreSQL, GitHub as the fake on loopback (the scenarios of `tests/test_faults.py`,
from `tests/fault_scenarios.py`). Prints, per scenario, what was acknowledged (or queued),
lost and doubled — both must be 0 — and the machine's steal time over the run.

Needs THE_LOOP_TEST_POSTGRES_URL (a role that may create databases). The database outage
cuts the scenario's own database off (connections killed, new ones refused); with
`--restart-server CMD` it runs CMD instead (e.g. "pg_ctlcluster 15 main restart"), which
disturbs every other user of that server.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import steal, steal_percent  # noqa: E402

from tests import fault_scenarios as scenarios  # noqa: E402
from tests.fault_support import Tally  # noqa: E402
from tests.support import POSTGRES_URL  # noqa: E402

SCENARIOS = ("redeliveries", "replica-killed", "spawners", "github", "outage")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--only", choices=SCENARIOS, action="append")
    parser.add_argument("--restart-server", metavar="CMD", help="restart PostgreSQL with CMD")
    args = parser.parse_args()
    if not POSTGRES_URL:
        print("bench/fault.py: set THE_LOOP_TEST_POSTGRES_URL", file=sys.stderr)
        return 2
    n = args.deliveries
    restart = shlex.split(args.restart_server) if args.restart_server else None
    runs = {
        "redeliveries": (
            f"2 replicas, {n} deliveries + 10 % redelivered",
            lambda d: scenarios.redeliveries(d, n),
        ),
        "replica-killed": (
            f"2 replicas, {n} deliveries, one SIGKILLed at a third",
            lambda d: scenarios.replica_killed(d, n),
        ),
        "spawners": (
            f"3 spawners, {args.jobs} jobs, one SIGKILLed mid-job",
            lambda d: scenarios.spawners_claim(d, args.jobs),
        ),
        "github": (
            f"GitHub 502/429 for a while, {n // 2} deliveries + 1 parked",
            lambda d: scenarios.github_flaky(d, n // 2)[0],
        ),
        "outage": (
            f"database {'restarted' if restart else 'cut off'} at a third of {n} deliveries",
            lambda d: scenarios.database_outage(d, n, restart=restart)[0],
        ),
    }
    failed = 0
    before = steal()
    for name in args.only or SCENARIOS:
        title, run = runs[name]
        directory = Path(tempfile.mkdtemp(prefix=f"the-loop-fault-{name}-"))
        started = time.monotonic()
        try:
            result: Tally = run(directory)
        except AssertionError as exc:
            print(f"{name:15} FAILED  {title}: {exc}")
            failed += 1
            continue
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        ok = not result.lost and not result.doubled
        failed += not ok
        print(
            f"{name:15} {'OK    ' if ok else 'FAILED'}  {title}: {result.line()}  "
            f"({time.monotonic() - started:.0f} s)"
        )
    share = steal_percent(before, steal())
    print(f"steal time   {share:.1f} % of CPU time during the run (/proc/stat)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
