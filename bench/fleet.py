#!/usr/bin/env python3
"""One spawner process hosting --sessions live sessions: delivery latency and its memory.

Releases --sessions issues through the App (label, then a signed execute reply; the
spawner process launches each in tmux), then delivers --comments follow-ups to sessions
picked at random across the fleet, one at a time, timing webhook sent → text on the
harness's terminal, while the spawner's watchdog keeps looking at every pane. Prints the
delivery percentiles and the spawner process's resident memory (VmRSS now, VmHWM peak).
Targets: delivery p99 ≤ 0.5 s, spawner RSS ≤ 60 MB.
Usage: bench/fleet.py [--sessions N] [--comments N] [--sandbox bubblewrap|none]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spawnerkit import Stack, launched, percentile, release, summary, wait_until

P99, RSS_MB = 0.5, 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--comments", type=int, default=100)
    parser.add_argument("--sandbox", choices=["bubblewrap", "none"], default="bubblewrap")
    args = parser.parse_args()
    spawn: list[float] = []
    times: list[float] = []
    rng = random.Random(7)
    with Stack(sandbox=args.sandbox) as stack:
        for number in range(1, args.sessions + 1):
            stack.warm_checkout(number)
            sent = release(stack, number)
            spawn.append(launched(stack, number) - sent)
        time.sleep(6)  # at least one watchdog pass over the whole fleet
        for k in range(args.comments):
            number = rng.randint(1, args.sessions)
            text = f"fleet follow-up {k} for issue {number}"
            sent = time.time()
            stack.comment(number, text)
            times.append(wait_until(lambda n=number, t=text: stack.received(n, t)) - sent)
        rss, peak = stack.spawner_rss_kib()
    print(summary(f"execute → launched while the fleet grew to {args.sessions}", spawn))
    print(summary(f"comment → pasted with {args.sessions} live sessions", times))
    print(f"spawner RSS: {rss / 1024:.1f} MB now, {peak / 1024:.1f} MB peak")
    ok = percentile(times, 0.99) <= P99 and peak / 1024 <= RSS_MB
    print(
        f"targets delivery p99 ≤ {P99 * 1000:.0f} ms, RSS ≤ {RSS_MB:.0f} MB: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
