"""The UTC windows a spend cap counts over: which day and month a moment falls in, when each
resets, and the words the waiting line says about it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.workitems.spend.spend_windows import (
    Window,
    day_key,
    first_day,
    month_key,
    reset_text,
    resets_at,
    window_key,
)

LATE = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_a_moment_falls_in_its_utc_day_and_month_whatever_its_zone() -> None:
    tokyo = datetime(
        2027, 1, 1, 8, 0, tzinfo=timezone(timedelta(hours=9))
    )  # 23:00 UTC the day before
    assert day_key(tokyo) == "2026-12-31" and month_key(tokyo) == "2026-12"
    assert day_key(datetime(2026, 12, 6, 0, 0)) == "2026-12-06"  # naive: taken as UTC


def test_a_day_resets_at_the_next_midnight_and_a_month_on_its_next_first() -> None:
    assert resets_at(Window.DAILY, LATE) == datetime(2027, 1, 1, tzinfo=UTC)
    assert resets_at(Window.MONTHLY, LATE) == datetime(2027, 1, 1, tzinfo=UTC)
    mid = datetime(2026, 2, 14, 12, tzinfo=UTC)
    assert resets_at(Window.DAILY, mid) == datetime(2026, 2, 15, tzinfo=UTC)
    assert resets_at(Window.MONTHLY, mid) == datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("window", "first"), [(Window.DAILY, "2026-12-31"), (Window.MONTHLY, "2026-12-01")]
)
def test_a_window_counts_from_its_first_day(window: Window, first: str) -> None:
    assert first_day(window, LATE) == first


def test_the_waiting_line_says_when_the_window_resets() -> None:
    assert reset_text(Window.DAILY, LATE) == "resets 00:00 UTC"
    assert reset_text(Window.MONTHLY, LATE) == "resets 1 Jan 00:00 UTC"
    assert window_key(Window.DAILY, LATE) == "daily 2026-12-31"
    assert window_key(Window.MONTHLY, LATE) == "monthly 2026-12"
