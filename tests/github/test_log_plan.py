"""The pure decisions of reading GitHub's delivery log: the cursor, what to fetch, the
budget, and what a rate-limit answer means."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.github.delivery_log import (
    LogEntry,
    RateLimits,
    entry_of,
    limits_of,
    next_cursor,
    refused_for_rate,
    wait_until,
)
from app.github.log_plan import RequestBudget, keep_newer, settled_cursor, to_fetch

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def entry(entry_id: int, guid: str, minutes_ago: float = 1) -> LogEntry:
    return LogEntry(entry_id, guid, NOW - timedelta(minutes=minutes_ago), "issues", None, 0, False)


def test_a_page_is_kept_down_to_the_cursor_or_on_a_first_pass_down_to_the_floor() -> None:
    page = [entry(5, "e"), entry(4, "d"), entry(3, "c", minutes_ago=90)]
    assert keep_newer(page, 4, None) == ([page[0]], True)
    assert keep_newer(page, None, NOW - timedelta(hours=1)) == (page[:2], True)
    assert keep_newer(page, 1, None) == (page, False)


def test_each_missing_delivery_is_fetched_once_oldest_first_by_its_newest_attempt() -> None:
    entries = [entry(9, "b"), entry(8, "a"), entry(7, "c"), entry(5, "a"), entry(4, "b")]
    fetched = to_fetch(entries, known={"c"})
    assert [(e.guid, e.id) for e in fetched] == [("b", 9), ("a", 8)]


def test_the_cursor_moves_only_past_settled_entries_of_a_complete_listing() -> None:
    entries = [entry(3, "c"), entry(2, "b"), entry(1, "a")]
    assert settled_cursor(entries, {"a", "b", "c"}, None, reached=True) == 3
    assert settled_cursor(entries, {"a", "c"}, None, reached=True) == 1
    assert settled_cursor(entries, {"b", "c"}, 0, reached=True) == 0
    assert settled_cursor(entries, {"a", "b", "c"}, 0, reached=False) == 0
    assert settled_cursor([], set(), 7, reached=True) == 7


def test_the_budget_is_a_share_of_the_hourly_limit_and_keeps_github_s_reserve() -> None:
    budget = RequestBudget.resume(0.5, None, 0, NOW)
    budget.spend(RateLimits(limit=10, remaining=9))
    assert budget.allowance == 5 and not budget.exhausted()
    for remaining in (8, 7, 6):
        budget.spend(RateLimits(limit=10, remaining=remaining))
    assert not budget.exhausted()
    budget.spend(RateLimits(limit=10, remaining=5))  # the other half stays for the App's calls
    assert budget.exhausted() and budget.resumes_at() == NOW + timedelta(hours=1)
    other = RequestBudget.resume(0.5, NOW, 0, NOW)
    reset = NOW + timedelta(minutes=20)
    other.spend(RateLimits(limit=10, remaining=3, reset_at=reset))  # spent by others
    assert other.exhausted() and other.resumes_at() == reset


def test_an_hour_old_budget_starts_again() -> None:
    assert RequestBudget.resume(0.5, NOW - timedelta(minutes=59), 40, NOW).used == 40
    fresh = RequestBudget.resume(0.5, NOW - timedelta(hours=1), 40, NOW)
    assert fresh.used == 0 and fresh.window_start == NOW


def test_rate_limit_answers_are_told_from_other_refusals() -> None:
    assert refused_for_rate(429, RateLimits())
    assert refused_for_rate(403, RateLimits(retry_after=30))
    assert refused_for_rate(403, RateLimits(remaining=0))
    assert not refused_for_rate(403, RateLimits(remaining=12))  # a permission refused
    assert not refused_for_rate(500, RateLimits(retry_after=3))


def test_the_wait_honours_retry_after_then_the_reset_and_grows_with_each_refusal() -> None:
    assert wait_until(RateLimits(retry_after=7), NOW, 1) == NOW + timedelta(seconds=7)
    assert wait_until(RateLimits(retry_after=7), NOW, 3) == NOW + timedelta(seconds=28)
    reset = NOW + timedelta(minutes=10)
    assert wait_until(RateLimits(remaining=0, reset_at=reset), NOW, 1) == reset
    assert wait_until(RateLimits(), NOW, 1) == NOW + timedelta(minutes=1)


def test_headers_and_link_are_read_as_github_sends_them() -> None:
    limits = limits_of(
        {"X-RateLimit-Limit": "5000", "x-ratelimit-remaining": "4990", "Retry-After": "3"}
    )
    assert (limits.limit, limits.remaining, limits.retry_after) == (5000, 4990, 3.0)
    assert limits_of({"X-RateLimit-Reset": "1700000000"}).reset_at == datetime.fromtimestamp(
        1700000000, UTC
    )
    link = (
        '<https://api.github.com/app/hook/deliveries?per_page=2&cursor=v1_12>; rel="next", '
        '<https://api.github.com/app/hook/deliveries?per_page=2>; rel="first"'
    )
    assert next_cursor(link) == "v1_12"
    assert next_cursor('<https://x/app/hook/deliveries?per_page=2>; rel="first"') is None
    assert next_cursor(None) is None


def test_a_listed_item_becomes_an_entry() -> None:
    item = {
        "id": 12,
        "guid": "0b989ba4-242f-11e5-81e1-c7b6966d2516",
        "delivered_at": "2019-06-03T00:57:16Z",
        "redelivery": True,
        "duration": 0.27,
        "status": "OK",
        "status_code": 200,
        "event": "issues",
        "action": "opened",
        "installation_id": 123,
        "repository_id": 456,
    }
    parsed = entry_of(item)
    assert parsed.id == 12 and parsed.redelivery and parsed.action == "opened"
    assert parsed.delivered_at == datetime(2019, 6, 3, 0, 57, 16, tzinfo=UTC)
    assert entry_of({**item, "action": None}).action is None
