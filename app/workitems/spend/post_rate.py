"""How often a session may post on its issue (`routing.sessionComments`), as a rule. Pure.

A post is admitted while fewer than `burst` posts were admitted in the last
`burst / perHour` hours: a burst of `burst` at once, then one more each time the oldest of
them leaves that span, `perHour` an hour on average. The times of the admitted posts are
kept on the work item (at most `burst` of them), so the rule holds across the App's
processes and restarts. The first refusal is remembered too, for the progress comment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.config import SessionComments

POSTS_KEY = "posts"  # the times (seconds since the epoch) of the last admitted posts
THROTTLED_KEY = "throttled"  # set once a post was refused: the progress comment says so


@dataclass(frozen=True)
class Admission:
    """The rule's answer: admitted or not, the times to keep, and for a refusal when to
    try again (seconds from now)."""

    admitted: bool
    kept: tuple[float, ...]
    retry_after: int = 0


def span_seconds(rule: SessionComments) -> float:
    """The span in which at most `burst` posts are admitted."""
    return 3600.0 * rule.burst / rule.per_hour


def admit(rule: SessionComments, posted: Sequence[float], now: float) -> Admission:
    """Whether one more post fits `rule`, given the times of the posts admitted before."""
    span = span_seconds(rule)
    recent = sorted(t for t in posted if now - span < t <= now)[-rule.burst :]
    if len(recent) < rule.burst:
        return Admission(True, (*recent, now))
    wait = recent[0] + span - now
    return Admission(False, tuple(recent), max(1, int(wait + 0.999)))


def posted_times(facts: Mapping[str, Any] | None) -> list[float]:
    """The admitted posts' times kept in a work item's session facts (bad entries dropped:
    the facts are the App's own, but a bad one must not stop every post)."""
    raw = (facts or {}).get(POSTS_KEY)
    return [float(t) for t in raw if isinstance(t, int | float)] if isinstance(raw, list) else []


def refusal_text(rule: SessionComments, retry_after: int) -> str:
    """What the session is told when a post is refused."""
    return (
        f"this work item's session has posted {rule.burst} comments or questions in the last "
        f"{_span_words(span_seconds(rule))} (routing.sessionComments allows {rule.burst} at "
        f"once and {rule.per_hour} an hour); nothing was posted. Try again in "
        f"{retry_after} s, or say it in fewer, longer comments."
    )


def _span_words(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"


THROTTLED_NOTE = (
    "The session posted faster than `routing.sessionComments` allows: some of its comments "
    "were refused, not posted."
)
