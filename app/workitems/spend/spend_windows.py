"""The windows a spend cap counts over, in UTC (pure): a day starts at 00:00 UTC, a month at
00:00 UTC on its first day. Spend is kept per UTC day (`day_key`); a month's spend is the sum
of its days, so one ledger row serves both windows.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum


class Window(StrEnum):
    DAILY = "daily"
    MONTHLY = "monthly"


WINDOWS = (Window.DAILY, Window.MONTHLY)


def utc(now: datetime) -> datetime:
    """`now` in UTC (a naive time is taken as UTC already)."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def day_key(now: datetime) -> str:
    """The UTC day `now` falls in: `2026-12-06`."""
    return utc(now).date().isoformat()


def month_key(now: datetime) -> str:
    """The UTC month `now` falls in: `2026-12`."""
    return utc(now).strftime("%Y-%m")


def first_day(window: Window, now: datetime) -> str:
    """The `day_key` of the window's first day: today, or the month's first."""
    today = utc(now).date()
    return (today if window is Window.DAILY else today.replace(day=1)).isoformat()


def resets_at(window: Window, now: datetime) -> datetime:
    """When the window `now` is in ends and a new one starts."""
    today = utc(now).date()
    if window is Window.DAILY:
        nxt = today + timedelta(days=1)
    else:
        nxt = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    return datetime.combine(nxt, time(0, 0), tzinfo=UTC)


def window_key(window: Window, now: datetime) -> str:
    """The name of the window `now` is in: `daily 2026-12-06`, `monthly 2026-12`."""
    return f"{window.value} {day_key(now) if window is Window.DAILY else month_key(now)}"


def reset_text(window: Window, now: datetime) -> str:
    """`resets 00:00 UTC` (a day), `resets 1 Jan 00:00 UTC` (a month)."""
    if window is Window.DAILY:
        return "resets 00:00 UTC"
    at = resets_at(window, now)
    return f"resets {at.day} {at.strftime('%b')} 00:00 UTC"
