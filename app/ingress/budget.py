"""How many bytes of bodies nobody has vouched for yet one process holds at once.

A webhook's signature and a Slack request's signature cover the body, so each can be checked
only once the whole body is in memory; until then the body is a stranger's. Each such body
takes a `Hold` on the process's `BodyBudget` for its declared length before a byte of it is
read (a body without a Content-Length grows its hold as it arrives), and gives it back when
it is verified or answered. A request the budget cannot hold is answered 503 with a
Retry-After and counted, never stored: strangers holding bodies open cost the process at
most the budget, however many of them there are.

Bodies over `LARGE_BODY` share a smaller part of the budget (`large_share`, enough for one
of GitHub's largest deliveries), so a few large bodies held open leave room for the ordinary
small deliveries and Slack requests meanwhile. Pure bookkeeping, used from the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024
LARGE_BODY = 1 * MiB
# Seconds a refused sender is asked to wait before trying again.
RETRY_AFTER_SECONDS = 10


class BodyBudget:
    """Bytes reserved by bodies in flight: at most `total`, of which at most `large_share`
    by bodies larger than `LARGE_BODY`."""

    def __init__(self, total: int, large_share: int) -> None:
        if total <= 0 or large_share <= 0:
            raise ValueError("a body budget is a positive number of bytes")
        self.total = total
        self.large_share = min(large_share, total)
        self.held = 0
        self.held_large = 0

    def hold(self, size: int) -> Hold | None:
        """A hold of `size` bytes, or None when it does not fit."""
        hold = Hold(self)
        return hold if hold.grow(size) else None

    def _fits(self, more: int, large_more: int) -> bool:
        return self.held + more <= self.total and self.held_large + large_more <= self.large_share


@dataclass(eq=False)
class Hold:
    """One body's part of its budget; `release` gives it back (once)."""

    budget: BodyBudget
    size: int = 0

    def grow(self, size: int) -> bool:
        """Hold `size` bytes in all (no less than now); False when the budget cannot."""
        if size <= self.size:
            return True
        before = self.size if self.size > LARGE_BODY else 0
        after = size if size > LARGE_BODY else 0
        if not self.budget._fits(size - self.size, after - before):
            return False
        self.budget.held += size - self.size
        self.budget.held_large += after - before
        self.size = size
        return True

    def release(self) -> None:
        if self.size > LARGE_BODY:
            self.budget.held_large -= self.size
        self.budget.held -= self.size
        self.size = 0
