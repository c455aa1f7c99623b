"""A work item's budget as rules: the limits in force, how far a run is into them, the words
of `the-loop budget +<amount>`, the ending comment of a budget stop, and a bad
`routing.budget` named with its key and file."""

from __future__ import annotations

import pytest

from app.config.operator_config import Budget, ConfigError, parse_config
from app.workitems.spend.budgets import (
    BudgetLevel,
    Limits,
    Raise,
    Spent,
    asks_lift,
    budget_text,
    level_of,
    limits_of,
    parse_raise,
    since_base,
    tokens_in,
)
from app.workitems.tell.endings import Ending, ending_text

KEYWORD = "the-loop budget"


def test_the_largest_share_decides_and_90_percent_warns() -> None:
    limits = Limits(tokens=10_000, usd=2.0, minutes=60)
    assert level_of(limits, Spent(tokens=8_999, usd=0.1, minutes=1)) == (BudgetLevel.UNDER, "")
    assert level_of(limits, Spent(tokens=9_000, usd=0.1, minutes=1)) == (BudgetLevel.WARN, "tokens")
    assert level_of(limits, Spent(tokens=10, usd=2.0, minutes=1)) == (BudgetLevel.SPENT, "usd")
    assert level_of(limits, Spent(tokens=9_500, usd=0.1, minutes=61)) == (
        BudgetLevel.SPENT,
        "minutes",
    )


def test_a_cost_that_is_not_known_never_counts_against_a_usd_limit() -> None:
    assert level_of(Limits(usd=1.0), Spent(tokens=10**9, usd=None)) == (BudgetLevel.UNDER, "")
    assert "cost unknown of $1.00" in budget_text(Limits(usd=1.0), Spent(usd=None))


def test_no_limit_configured_means_never_warned_nor_stopped() -> None:
    assert limits_of(Budget(), {"tokens": 5}).empty
    assert level_of(Limits(), Spent(tokens=10**12, usd=10**6, minutes=10**6)) == (
        BudgetLevel.UNDER,
        "",
    )


def test_raises_add_to_configured_limits_only() -> None:
    limits = limits_of(Budget(tokens=1000, usd=1.5), {"tokens": 500.0, "usd": 2, "minutes": 9})
    assert limits == Limits(tokens=1500, usd=3.5, minutes=None)
    assert limits_of(Budget(tokens=1000), {"tokens": -50, "usd": "x"}) == Limits(tokens=1000)


def test_counts_are_measured_from_the_start_of_the_run() -> None:
    counts = {
        "input_tokens": 900,
        "output_tokens": 100,
        "cache_read_input_tokens": 50,
        "cache_creation_input_tokens": 10,
        "requests": 7,
    }
    base = {"input_tokens": 400, "output_tokens": 200, "requests": "3"}
    run = since_base(counts, base)
    assert run["input_tokens"] == 500 and run["output_tokens"] == 0 and run["requests"] == 7
    assert tokens_in(run) == 560


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("the-loop budget +50000", Raise("tokens", 50000)),
        ("the-loop budget +200k", Raise("tokens", 200_000)),
        ("The-Loop Budget  +1.5M\nbecause it is close", Raise("tokens", 1_500_000)),
        ("the-loop budget +$5", Raise("usd", 5.0)),
        ("the-loop budget +$2.50", Raise("usd", 2.5)),
        ("the-loop budget +30min", Raise("minutes", 30.0)),
        ("the-loop budget + 45 minutes", Raise("minutes", 45.0)),
    ],
)
def test_a_raise_names_its_amount_and_kind(words: str, expected: Raise) -> None:
    assert parse_raise(words, KEYWORD) == expected


@pytest.mark.parametrize(
    ("words", "why"),
    [
        ("the-loop budget", "say how much to add"),
        ("the-loop budget 500", "say how much to add"),
        ("the-loop budget +5m", "unknown unit `m`"),
        ("the-loop budget +$5k", "takes no unit"),
        ("the-loop budget +0", "more than zero"),
        ("the-loop budget +99999999999M", "more than one raise"),
        ("the-loop budget +-5", "say how much to add"),
    ],
)
def test_a_raise_without_a_clear_amount_says_why(words: str, why: str) -> None:
    refused = parse_raise(words, KEYWORD)
    assert isinstance(refused, str) and why in refused


def test_the_budget_line_names_each_limit() -> None:
    text = budget_text(Limits(tokens=10_000, usd=2, minutes=30), Spent(9_200, 0.41, 12.4))
    assert text == "tokens 9.2k of 10k · $0.41 of $2.00 · 12 of 30 min"


def test_a_budget_stop_says_what_was_spent_where_the_work_is_and_how_to_go_on() -> None:
    ending = Ending(
        work_item_id="github:o/r#1",
        launch="2026-01-01T00:00:00",
        phase="implementation",
        how="stopped",
        reason="budget",
        changed_files=["src/a.py"],
        usage="**Usage:** 11k tokens (in 10k · out 1k · cache 0) · $0.05 · 3 requests",
        budget="**Budget:** tokens 11k of 10k",
        branch="the-loop/issue-1",
        branch_url="https://github.com/o/r/tree/the-loop/issue-1",
        pull_request={"number": 4, "html_url": "https://github.com/o/r/pull/4"},
    )
    text = ending_text(ending)
    assert "its budget is spent" in text and "**stopped** (budget)" in text
    assert "phase `implementation`" in text
    assert "**Budget:** tokens 11k of 10k" in text and "· $0.05 ·" in text
    assert (
        "**Where the work is:** [`the-loop/issue-1`](https://github.com/o/r/tree/the-loop/issue-1)"
        " and pull request [#4](https://github.com/o/r/pull/4)"
    ) in text
    assert "`the-loop budget +<amount>`" in text and "`+$5`" in text


@pytest.mark.parametrize(
    ("budget", "key"),
    [
        ({"tokens": 0}, "routing.budget.tokens"),
        ({"tokens": "lots"}, "routing.budget.tokens"),
        ({"usd": -1}, "routing.budget.usd"),
        ({"minutes": 0}, "routing.budget.minutes"),
        ({"daily": {"tokens": 0}}, "routing.budget.daily.tokens"),
        ({"monthly": {"repository": {"usd": -5}}}, "routing.budget.monthly.repository.usd"),
        ({"daily": {"minutes": 30}}, "routing.budget.daily.minutes"),
    ],
)
def test_a_bad_budget_is_named_with_its_key_and_file(budget: dict, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"routing": {"budget": budget}}, "cli-config.yaml")
    assert str(raised.value).startswith(f"cli-config.yaml: {key}:")


def test_a_budget_parses_each_limit_optional() -> None:
    config = parse_config({"routing": {"budget": {"usd": 2.5}}})
    assert config.routing.budget == Budget(usd=2.5)


@pytest.mark.parametrize(
    ("body", "lifts"),
    [
        ("the-loop budget", True),
        ("  The-Loop Budget\n", True),
        ("the-loop budget\n+200k", False),  # a raise, as `parse_raise` reads it
        ("the-loop budget lift", True),
        ("the-loop budget +200k", False),
        ("the-loop budget more", False),
    ],
)
def test_the_keyword_alone_lifts_the_spend_caps(body: str, lifts: bool) -> None:
    assert asks_lift(body, "the-loop budget") is lifts


def test_a_spend_cap_stop_says_how_to_lift_it() -> None:
    ending = Ending(
        work_item_id="github:o/r#1",
        launch="2026-01-01T00:00:00",
        phase="implementation",
        how="stopped",
        reason="budget",
        budget="**Budget:** daily budget reached: tokens 1k of 1k (resets 00:00 UTC)",
        capped=True,
    )
    text = ending_text(ending)
    assert "**Budget:** daily budget reached" in text
    assert "comments `the-loop budget` here, which lifts the spend caps" in text
    assert "+<amount>" not in text
