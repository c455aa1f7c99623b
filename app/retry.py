"""Waiting before trying again: one formula for the durable queues, one helper for loops.

`queue_delay` is how long a stored row (a webhook delivery, a Slack message) waits before
its next attempt; the row carries its attempt count, so the formula needs no jitter.
`WakeLoop` is a background thread that works while there is work and otherwise sleeps until
woken or `poll` seconds pass (the progress publisher, the Slack sender). `Backoff` is the
in-process delay of a loop that reconnects (the spawner's claim loop and
event sender, the database watcher): capped, doubling, with jitter so that many spawners
do not come back at the same instant after an App restart.
"""

from __future__ import annotations

import logging
import random
import threading

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


class WakeLoop:
    """A daemon thread calling `run_once` until stopped: again at once while it finds work,
    otherwise after `poll` seconds or when `wake` is set. An error is logged and the loop
    goes on (the database may be briefly away)."""

    thread_name = "loop"

    def __init__(self, poll: float) -> None:
        self.poll = poll
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> bool:
        """Do one piece of work; True when there was some."""
        raise NotImplementedError

    def run_forever(self) -> None:
        while not self._stop.is_set():
            try:
                if self.run_once():
                    continue
            except Exception:  # this loop's edge: keep the thread
                logging.getLogger(type(self).__module__).exception("%s error", self.thread_name)
            self.wake.wait(self.poll)
            self.wake.clear()

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(
                target=self.run_forever, name=self.thread_name, daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
