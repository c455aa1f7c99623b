"""How many requests of one kind one process serves at once, in all and per holder.

A git request (`/git/…`) holds one of the App's WSGI threads while its body streams in and
its answer streams out; a session's token is not trusted, so one session could otherwise
hold every thread with requests that trickle. `Slots` caps those requests per holder (a
session's token) and in all (below the thread count, so `/healthz` and the spawners' claims
keep threads of their own); a request past either cap is refused rather than queued.
Bookkeeping under a lock: the request threads of one process share it.
"""

from __future__ import annotations

import threading


class Slots:
    """At most `total` taken at once, at most `each` of them by one holder."""

    def __init__(self, total: int, each: int) -> None:
        if total <= 0 or each <= 0:
            raise ValueError("a request cap is a positive number")
        self.total = total
        self.each = each
        self.taken: dict[str, int] = {}
        self.in_use = 0
        self._lock = threading.Lock()

    def take(self, holder: str) -> str | None:
        """None when `holder` got a slot (give it back with `give`), else which cap refused:
        "holder" (its own share is taken) or "total"."""
        with self._lock:
            held = self.taken.get(holder, 0)
            if held >= self.each:
                return "holder"
            if self.in_use >= self.total:
                return "total"
            self.taken[holder] = held + 1
            self.in_use += 1
            return None

    def give(self, holder: str) -> None:
        with self._lock:
            held = self.taken.get(holder, 0)
            if held <= 0:
                return
            if held == 1:
                del self.taken[holder]
            else:
                self.taken[holder] = held - 1
            self.in_use -= 1
