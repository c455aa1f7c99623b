"""A work item's cost and usage line: prices from the operator's config or the shipped
table, and the line the progress comment shows (pure)."""

from __future__ import annotations

import pytest

from app.config.operator_config import ConfigError, parse_config
from app.workitems.decide.walk import Walk
from app.workitems.spend.costs import cost_usd, price_for, usage_line
from app.workitems.tell.progress_text import ProgressView, render_progress

COUNTS = {
    "input_tokens": 980_000,
    "output_tokens": 41_000,
    "cache_read_input_tokens": 200_000,
    "cache_creation_input_tokens": 10_000,
    "requests": 57,
}


def test_a_configured_price_wins_over_the_shipped_one() -> None:
    config = parse_config(
        {
            "models": [
                {"name": "opus", "id": "claude-opus-4-1"},
                {"name": "house", "id": "claude-opus-4-1", "price": {"input": 1, "output": 2}},
            ]
        }
    )
    shipped = price_for(config, "opus")
    assert shipped is not None and (shipped.input, shipped.output) == (15, 75)
    house = price_for(config, "house")
    assert house is not None and cost_usd(COUNTS, house) == pytest.approx(0.98 + 0.082)
    assert price_for(config, "sonnet") is not None  # an alias of a shipped model
    assert price_for(config, "a-model-nobody-prices") is None


def test_cost_counts_each_kind_of_token_at_its_price() -> None:
    price = price_for(parse_config({}), "claude-sonnet-4-5")
    assert price is not None
    # 0.98 M in at $3, 0.041 M out at $15, 0.2 M cache reads at $0.30, 0.01 M writes at $3.75
    assert cost_usd(COUNTS, price) == pytest.approx(2.94 + 0.615 + 0.06 + 0.0375)


def test_the_usage_line_and_where_the_progress_comment_shows_it() -> None:
    line = usage_line(COUNTS, 3.8412)
    assert line == "**Usage:** 1.2M tokens (in 980k · out 41k · cache 210k) · $3.84 · 57 requests"
    assert "cost unknown" in usage_line(COUNTS, None)
    view = ProgressView(work_item_id="github:o/r#1", status="running", walk=Walk(pointer="design"))
    assert "**Usage:**" not in render_progress(view)
    shown = render_progress(ProgressView(**{**view.__dict__, "usage": line}))
    assert line in shown


def test_a_negative_price_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"models\[m\]\.price\.output"):
        parse_config({"models": [{"name": "m", "price": {"input": 1, "output": -2}}]})
