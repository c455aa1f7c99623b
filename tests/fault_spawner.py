"""A spawner for the fault tests, run as its own process (`python -m tests.fault_spawner`):
it claims jobs over the real spawner API (`app.spawner.appclient`), "runs" each for a moment
and reports it done, writing `start <id> <time>` and `done <id> <time>` lines to its log as
it goes (Unix time: a gap between lines shows where claims stalled).

`--hold N` makes it stop at the start of its N-th job and wait there forever (to be
SIGKILLed mid-job); it exits after `--idle` seconds without a job.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.spawner.appclient import AppClient, AppUnavailable, Rejected
from tests.fault_support import REPO


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("log", type=Path)
    parser.add_argument("--hold", type=int, default=0)
    parser.add_argument("--idle", type=float, default=6.0)
    args = parser.parse_args()
    client = AppClient(args.url, args.token)
    client.register(args.log.stem, [REPO], ["claude"])
    taken = 0
    last_job = time.monotonic()
    with args.log.open("a", buffering=1) as log:
        while time.monotonic() - last_job < args.idle:
            try:
                job = client.claim(wait=1.0)
            except AppUnavailable as exc:  # logged: a run of these explains a stall
                log.write(f"unavailable {time.time():.3f} {exc}\n")
                time.sleep(0.2)
                continue
            if job is None:
                continue
            taken += 1
            last_job = time.monotonic()
            log.write(f"start {job.id} {time.time():.3f}\n")
            if taken == args.hold:
                while True:
                    time.sleep(60)
            time.sleep(0.01)  # the work
            try:
                client.result(job.id, True, {"session_id": f"s-{job.id}"})
            except Rejected as exc:  # no longer held (its lease ran out): not done here
                log.write(f"refused {job.id} {exc.status}\n")
                continue
            log.write(f"done {job.id} {time.time():.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
