"""How often a session may post (`routing.sessionComments`), and its words made inert: the
burst at once, then one more as the oldest leaves the span; bad kept times ignored; the
refusal says what the rule is; @-mentions and team mentions shown but notifying nobody."""

from __future__ import annotations

import pytest

from app.config.operator_config import SessionComments
from app.gate.markers import defuse_mentions
from app.workitems.spend.post_rate import admit, posted_times, refusal_text, span_seconds

RULE = SessionComments(burst=5, per_hour=30)  # 5 in any 10 minutes


def test_a_burst_is_admitted_then_refused_until_the_oldest_leaves_the_span() -> None:
    kept: tuple[float, ...] = ()
    answers = []
    for n in range(8):
        answer = admit(RULE, kept, 1000.0 + n * 0.01)
        answers.append(answer.admitted)
        kept = answer.kept
    assert answers == [True] * 5 + [False] * 3
    refused = admit(RULE, kept, 1001.0)
    assert not refused.admitted and refused.retry_after == 599
    assert span_seconds(RULE) == 600.0
    later = admit(RULE, kept, 1000.0 + 600.0 + 0.001)  # the first post left the span
    assert later.admitted and len(later.kept) == 5
    assert not admit(RULE, later.kept, 1000.0 + 600.0 + 0.002).admitted


def test_the_rate_holds_over_an_hour() -> None:
    kept: tuple[float, ...] = ()
    admitted = 0
    for second in range(0, 3600, 5):  # a post every five seconds for an hour
        answer = admit(RULE, kept, float(second))
        admitted += answer.admitted
        kept = answer.kept
    assert admitted <= RULE.per_hour


def test_kept_times_that_are_not_numbers_are_dropped() -> None:
    assert posted_times({"posts": [1.5, "x", None, 2]}) == [1.5, 2.0]
    assert posted_times({"posts": "nonsense"}) == [] and posted_times(None) == []


def test_the_refusal_names_the_rule_and_when_to_try_again() -> None:
    text = refusal_text(RULE, 42)
    assert "routing.sessionComments" in text and "10 minutes" in text and "42 s" in text


@pytest.mark.parametrize(
    ("text", "inert"),
    [
        ("@octocat look", "@\u200boctocat look"),
        ("cc @acme/reviewers.", "cc @\u200bacme/reviewers."),
        ("(@a-b) and\n@c", "(@\u200ba-b) and\n@\u200bc"),
        ("mail dev@example.com", "mail dev@example.com"),  # no mention on GitHub either
        ("`@octocat`", "`@\u200boctocat`"),
        ("a lone @ sign", "a lone @ sign"),
    ],
)
def test_mentions_are_shown_but_notify_nobody(text: str, inert: str) -> None:
    assert defuse_mentions(text) == inert
    assert defuse_mentions(inert) == inert  # idempotent
