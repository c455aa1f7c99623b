"""The decisions of a pass over GitHub's delivery log, pure: how far back to read, which
entries to fetch, how far the cursor may move, and how much of the hourly request budget
is left for the log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.github.delivery_log import LogEntry, RateLimits

HOUR = timedelta(hours=1)
# GitHub's smallest hourly budget for an App; the answers' X-RateLimit-Limit replaces it.
DEFAULT_LIMIT = 5000
# On its first pass the App looks this far back (it cannot know what came before it).
FIRST_LOOKBACK = timedelta(hours=1)


def keep_newer(
    page: list[LogEntry], seen_id: int | None, floor: datetime | None
) -> tuple[list[LogEntry], bool]:
    """The entries of a page (newest first) not yet read, and whether the page reached what
    was read before: an entry at or below `seen_id`, or (first pass) one older than `floor`."""
    kept: list[LogEntry] = []
    for entry in page:
        if seen_id is not None and entry.id <= seen_id:
            return kept, True
        if floor is not None and entry.delivered_at < floor:
            return kept, True
        kept.append(entry)
    return kept, False


def to_fetch(entries: Iterable[LogEntry], known: set[str]) -> list[LogEntry]:
    """One entry per guid not in the inbox (`known`), oldest guid first, so what is
    recovered is queued in the order GitHub first sent it. Of several attempts at one
    delivery (redeliveries share the guid) the newest is fetched."""
    newest: dict[str, LogEntry] = {}
    first: dict[str, int] = {}
    for entry in entries:
        if entry.guid in known:
            continue
        if entry.guid not in newest or entry.id > newest[entry.guid].id:
            newest[entry.guid] = entry
        first[entry.guid] = min(first.get(entry.guid, entry.id), entry.id)
    return sorted(newest.values(), key=lambda e: first[e.guid])


def settled_cursor(
    entries: Iterable[LogEntry], settled: set[str], seen_id: int | None, reached: bool
) -> int | None:
    """How far the log now counts as read: the newest entry below which every entry read
    is settled (in the inbox, or not for it). A listing that stopped before reaching the old
    cursor (`reached`) leaves it where it was: the entries between were never seen."""
    if not reached:
        return seen_id
    cursor = seen_id
    for entry in sorted(entries, key=lambda e: e.id):
        if entry.guid not in settled:
            break
        cursor = entry.id if cursor is None else max(cursor, entry.id)
    return cursor


@dataclass
class RequestBudget:
    """The requests the log may still take this hour: `share` of the App's hourly limit,
    counted from `window_start`, and never below what GitHub's answers say must stay
    for the App's other calls (`X-RateLimit-Remaining` over the reserve)."""

    share: float
    window_start: datetime
    used: int = 0
    limit: int = DEFAULT_LIMIT
    remaining: int | None = None
    reset_at: datetime | None = field(default=None)

    @classmethod
    def resume(
        cls, share: float, window_start: datetime | None, used: int, now: datetime
    ) -> RequestBudget:
        """The budget of the hour that began at `window_start`, or a new hour from `now`."""
        if window_start is None or now - window_start >= HOUR or window_start > now:
            return cls(share, now)
        return cls(share, window_start, used)

    @property
    def allowance(self) -> int:
        return int(self.share * self.limit)

    def spend(self, limits: RateLimits) -> None:
        self.used += 1
        if limits.limit:
            self.limit = limits.limit
        self.remaining = limits.remaining
        self.reset_at = limits.reset_at

    def exhausted(self) -> bool:
        if self.used >= self.allowance:
            return True
        reserve = self.limit - self.allowance
        return self.remaining is not None and self.remaining <= reserve

    def resumes_at(self) -> datetime:
        """When an exhausted budget allows requests again: its hour's end, or GitHub's reset
        when the reserve ran low first."""
        end = self.window_start + HOUR
        if self.used < self.allowance and self.reset_at is not None:
            return self.reset_at
        return end


@dataclass
class PassCounts:
    """What one pass did: the event it records and the status page's last pass."""

    mode: str
    listed: int = 0  # log entries read back to the cursor
    missing: int = 0  # deliveries not in the inbox
    recovered: int = 0  # stored by this pass
    duplicates: int = 0  # stored meanwhile under their id or body (pushed, another pass)
    refused: int = 0  # failed the shape checks
    skipped: int = 0  # pings, and entries gone from the log
    requests: int = 0
    complete: bool = False  # read back to the cursor and fetched everything missing
    rate_limited: bool = False
    budget_spent: bool = False
    resumes_at: str | None = None
    error: str | None = None  # why the pass ended early (GitHub or the store away)

    def fields(self) -> dict[str, Any]:
        return dict(self.__dict__)
