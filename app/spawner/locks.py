"""One lock per work item, so a job and the watchdog never act on one session at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ItemLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def _lock(self, work_item_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(work_item_id, threading.Lock())

    @contextmanager
    def hold(self, work_item_id: str) -> Iterator[None]:
        """Wait for the item's lock."""
        with self._lock(work_item_id):
            yield

    @contextmanager
    def try_hold(self, work_item_id: str) -> Iterator[bool]:
        """Take the item's lock only if it is free; yields whether it was taken."""
        lock = self._lock(work_item_id)
        taken = lock.acquire(blocking=False)
        try:
            yield taken
        finally:
            if taken:
                lock.release()
