"""The App's webhook delivery log on GitHub, read with the App's JWT through githubkit.

`GET /app/hook/deliveries` lists every attempt GitHub made to deliver a webhook, newest
first, `per_page` at a time, the next page named by a `cursor` in the `Link` header; each
entry has GitHub's numeric id, the `guid` that was the `X-GitHub-Delivery` header, the event,
its action and the attempt's status. `GET /app/hook/deliveries/{id}` adds what was sent:
`request.headers` and `request.payload` (the body as a JSON object, not its bytes).

This module is the edge only: one page, one payload, and what each answer said about the
App's request budget (`RateLimits`). A rate-limit answer (429, or 403 with `Retry-After` or no
requests remaining) raises `RateLimited` with when GitHub allows the next request; the
caller decides what to do (`app.github.reconcile`). githubkit's own retrying is off here:
a pass stops and waits rather than sleeping inside a request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from githubkit import GitHub
from githubkit.exception import RequestFailed

from app.github.github_errors import GitHubError
from app.retry import queue_delay

PER_PAGE = 100  # GitHub's largest page
# Without a word from GitHub on when to come back, a secondary limit is waited out for at
# least a minute, then longer each time in a row (GitHub's advice).
SECONDARY_WAIT_SECONDS = 60.0
LONGEST_WAIT_SECONDS = 3600.0


@dataclass(frozen=True)
class LogEntry:
    """One attempt in the log (a redelivery is another entry with the same guid)."""

    id: int
    guid: str
    delivered_at: datetime
    event: str
    action: str | None
    status_code: int
    redelivery: bool


@dataclass(frozen=True)
class RateLimits:
    """What an answer's rate-limit headers said (None where a header was absent)."""

    limit: int | None = None
    remaining: int | None = None
    reset_at: datetime | None = None
    retry_after: float | None = None


class RateLimited(GitHubError):
    """GitHub refused a request for the rate limit; no request before `until`."""

    def __init__(self, status: int, limits: RateLimits, until: datetime) -> None:
        super().__init__(f"GitHub answered {status}: rate limited until {until.isoformat()}")
        self.status = status
        self.limits = limits
        self.until = until


class LogGone(GitHubError):
    """The entry is no longer in the log (GitHub keeps deliveries for a few days)."""


def limits_of(headers: Mapping[str, str]) -> RateLimits:
    """The budget an answer's headers state (names compared case-insensitively)."""
    lower = {k.lower(): v for k, v in headers.items()}

    def number(name: str) -> int | None:
        try:
            return int(lower[name])
        except (KeyError, ValueError):
            return None

    reset = number("x-ratelimit-reset")
    retry = number("retry-after")
    return RateLimits(
        limit=number("x-ratelimit-limit"),
        remaining=number("x-ratelimit-remaining"),
        reset_at=datetime.fromtimestamp(reset, UTC) if reset is not None else None,
        retry_after=float(retry) if retry is not None and retry >= 0 else None,
    )


def refused_for_rate(status: int, limits: RateLimits) -> bool:
    """Whether an error answer is a rate limit (primary or secondary) rather than a fault."""
    if status == 429:
        return True
    return status == 403 and (limits.retry_after is not None or limits.remaining == 0)


def wait_until(limits: RateLimits, now: datetime, refusals: int) -> datetime:
    """When to ask again after the `refusals`-th rate-limit answer in a row: `Retry-After`
    when GitHub gave one, else the budget's reset when none is left, else a minute; and the
    one backoff formula (`queue_delay`) doubling that wait for each refusal in a row."""
    if limits.retry_after is not None:
        base = limits.retry_after
    elif limits.remaining == 0 and limits.reset_at is not None:
        base = max(1.0, (limits.reset_at - now).total_seconds())
    else:
        base = SECONDARY_WAIT_SECONDS
    seconds = queue_delay(refusals, base=base, cap=max(base, LONGEST_WAIT_SECONDS))
    return now + timedelta(seconds=seconds)


def next_cursor(link: str | None) -> str | None:
    """The `cursor` of the `rel="next"` page a `Link` header names; None on the last page."""
    for part in (link or "").split(","):
        target, _, params = part.partition(";")
        if 'rel="next"' not in params.replace(" ", ""):
            continue
        url = target.strip().removeprefix("<").removesuffix(">")
        values = parse_qs(urlsplit(url).query).get("cursor")
        return values[0] if values else None
    return None


def _moment(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def entry_of(item: Mapping[str, Any]) -> LogEntry:
    """A log entry from the JSON GitHub lists it as."""
    action = item.get("action")
    return LogEntry(
        id=int(item["id"]),
        guid=str(item["guid"]),
        delivered_at=_moment(item["delivered_at"]),
        event=str(item.get("event") or ""),
        action=action if isinstance(action, str) else None,
        status_code=int(item.get("status_code") or 0),
        redelivery=bool(item.get("redelivery")),
    )


class LogReader:
    """Requests to the log on one open HTTP client (one pass), counting them."""

    def __init__(self, github: GitHub[Any], clock: Any) -> None:
        self._github = github
        self._clock = clock
        self.requests = 0
        self.limits = RateLimits()  # what the last answer said

    def _answered(self, headers: Mapping[str, str]) -> None:
        self.requests += 1
        self.limits = limits_of(headers)

    def _refused(self, exc: RequestFailed, refusals: int) -> Exception:
        status = exc.response.status_code
        self._answered(exc.response.headers)
        if refused_for_rate(status, self.limits):
            return RateLimited(
                status, self.limits, wait_until(self.limits, self._clock(), refusals)
            )
        if status == 404:
            return LogGone(str(exc))
        return exc

    def page(self, cursor: str | None, refusals: int = 0) -> tuple[list[LogEntry], str | None]:
        """One page, newest first, and the cursor of the next (None: this was the last)."""
        try:
            if cursor is None:
                resp = self._github.rest.apps.list_webhook_deliveries(per_page=PER_PAGE)
            else:
                resp = self._github.rest.apps.list_webhook_deliveries(
                    per_page=PER_PAGE, cursor=cursor
                )
        except RequestFailed as exc:
            raise self._refused(exc, refusals) from exc
        self._answered(resp.headers)
        items = resp.json()
        entries = [entry_of(item) for item in items] if isinstance(items, list) else []
        return entries, next_cursor(resp.headers.get("link"))

    def payload(self, entry_id: int, refusals: int = 0) -> tuple[dict[str, str], Any]:
        """What GitHub sent for entry `entry_id`: its request headers (lower-case names)
        and its payload as JSON."""
        try:
            resp = self._github.rest.apps.get_webhook_delivery(entry_id)
        except RequestFailed as exc:
            raise self._refused(exc, refusals) from exc
        self._answered(resp.headers)
        data = resp.json()
        request = data.get("request") if isinstance(data, dict) else None
        request = request if isinstance(request, dict) else {}
        sent = request.get("headers")
        items = sent.items() if isinstance(sent, dict) else ()
        headers = {str(k).lower(): str(v) for k, v in items}
        return headers, request.get("payload")


@contextmanager
def reading(github: GitHub[Any], clock: Any) -> Iterator[LogReader]:
    """A `LogReader` whose requests share one HTTP client, closed at the end."""
    with github:
        yield LogReader(github, clock)
