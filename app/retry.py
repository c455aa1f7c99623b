"""Waiting before trying again: one formula for the durable queues, one helper for loops.

`queue_delay` is how long a stored row (a webhook delivery, a Slack message) waits before
its next attempt; the row carries its attempt count, so the formula needs no jitter.
`Backoff` is the in-process delay of a loop that reconnects (the spawner's claim loop and
event sender, the database watcher): capped, doubling, with jitter so that many spawners
do not come back at the same instant after an App restart.
"""

from __future__ import annotations

import random

QUEUE_DELAY_CAP = 300.0


def queue_delay(attempts: int, base: float = 1.0, cap: float = QUEUE_DELAY_CAP) -> float:
    """Seconds before attempt `attempts + 1`: base, doubling each time, at most `cap`."""
    return float(min(cap, base * 2 ** max(0, attempts - 1)))


class Backoff:
    """Capped exponential delays with ±20 % jitter; `reset` after a success."""

    def __init__(self, first: float = 0.5, cap: float = 30.0, jitter: float = 0.2) -> None:
        self.first, self.cap, self.jitter = first, cap, jitter
        self.current = first

    def next(self) -> float:
        delay = self.current * random.uniform(1 - self.jitter, 1 + self.jitter)
        self.current = min(self.current * 2, self.cap)
        return delay

    def reset(self) -> None:
        self.current = self.first
