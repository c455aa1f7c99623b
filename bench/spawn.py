#!/usr/bin/env python3
"""Execute reply delivered → Claude launched in tmux, with a warm checkout.

For each of --items issues: label it (its checklist is posted), clone its working tree ahead
of time (a warm checkout), then time from the signed `issue_comment` "the-loop execute"
webhook being sent to the harness process being exec'd in its tmux pane by the spawner
process. The path timed is the whole product: webhook ingress, inbox worker, gate freeze,
job queue, the spawner's long-poll wake, claim (installation token), checkout reuse, state
file, trust pre-seed, tmux launch. Targets: p50 ≤ 0.5 s, p99 ≤ 1.5 s.
Usage: bench/spawn.py [--items N] [--sandbox bubblewrap|none]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spawnerkit import Stack, launched, percentile, release, summary

P50, P99 = 0.5, 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--sandbox", choices=["bubblewrap", "none"], default="bubblewrap")
    args = parser.parse_args()
    times: list[float] = []
    with Stack(sandbox=args.sandbox) as stack:
        for number in range(1, args.items + 1):
            stack.warm_checkout(number)
            sent = release(stack, number)
            times.append(launched(stack, number) - sent)
    print(summary("execute → launched (warm checkout)", times))
    ok = percentile(times, 0.5) <= P50 and percentile(times, 0.99) <= P99
    verdict = "met" if ok else "MISSED"
    print(f"targets p50 ≤ {P50 * 1000:.0f} ms, p99 ≤ {P99 * 1000:.0f} ms: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
