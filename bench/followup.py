#!/usr/bin/env python3
"""Follow-up comment → pasted into the session's pane.

Releases --sessions issues (each gets a live session in tmux), then sends --comments signed
`issue_comment` webhooks from an authorized user, round-robin over the sessions, one at a
time, and times each from the webhook being sent to its text arriving on the harness's
terminal (tmux load-buffer + bracketed paste-buffer + Enter, by the spawner process).
Target: p50 ≤ 0.5 s.
Usage: bench/followup.py [--sessions N] [--comments N] [--sandbox bubblewrap|none]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spawnerkit import Stack, launched, percentile, release, summary, wait_until

P50 = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--comments", type=int, default=40)
    parser.add_argument("--sandbox", choices=["bubblewrap", "none"], default="bubblewrap")
    args = parser.parse_args()
    times: list[float] = []
    with Stack(sandbox=args.sandbox) as stack:
        for number in range(1, args.sessions + 1):
            stack.warm_checkout(number)
            release(stack, number)
            launched(stack, number)
        time.sleep(0.5)  # every session's terminal is up
        for k in range(args.comments):
            number = 1 + k % args.sessions
            text = f"follow-up number {k}: please also handle the empty list"
            sent = time.time()
            stack.comment(number, text)
            times.append(wait_until(lambda n=number, t=text: stack.received(n, t)) - sent)
    print(summary("comment → pasted", times))
    ok = percentile(times, 0.5) <= P50
    print(f"target p50 ≤ {P50 * 1000:.0f} ms: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
