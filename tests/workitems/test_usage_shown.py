"""Where a work item's usage shows beyond the progress comment (pure parts): the sessions'
wall-clock time kept from launch to end and added to the usage line, and the usage and budget
lines in the Slack thread's parent message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.config.operator_config import parse_config
from app.web.present import usage_words
from app.workitems.decide.walk import Walk
from app.workitems.spend.costs import usage_line
from app.workitems.spend.usage import by_choice, clocked, wall_minutes
from app.workitems.tell.progress_text import ProgressView, mirror_payload, render_progress
from channels.walk_blocks import progress

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
COUNTS = {"input_tokens": 980_000, "output_tokens": 41_000, "requests": 57}


def test_each_session_counts_from_launch_to_its_end_and_a_relaunch_adds_on() -> None:
    facts = clocked({"stall": "x"}, "session.spawned", T0)
    assert wall_minutes(facts, T0 + timedelta(minutes=5)) == 5  # still running: up to now
    facts = clocked(facts, "session.usage", T0 + timedelta(minutes=9))  # no clock event
    facts = clocked(facts, "session.exited", T0 + timedelta(minutes=30))
    assert facts["stall"] == "x" and wall_minutes(facts, T0 + timedelta(hours=9)) == 30
    facts = clocked(facts, "session.respawned", T0 + timedelta(hours=1))
    facts = clocked(facts, "session.respawned", T0 + timedelta(hours=1, minutes=4))  # drift
    facts = clocked(facts, "session.stopped", T0 + timedelta(hours=1, minutes=7))
    assert wall_minutes(facts, None) == 37
    assert wall_minutes({}, T0) is None  # never launched: no time shown


def test_the_usage_line_ends_with_the_time() -> None:
    line = usage_line(COUNTS, 3.8412, 37.6)
    assert line.endswith("· $3.84 · 57 requests · 37 min")
    assert usage_line(COUNTS, None, 0.2).endswith("· <1 min")
    assert usage_line(COUNTS, None, 125).endswith("· 2 h 05 min")
    assert usage_line(COUNTS, None).endswith("57 requests")
    worked = {**COUNTS, "active_ms": 12 * 60_000}
    assert usage_line(worked, None, 37).endswith("· 37 min (12 min active)")
    assert usage_line(worked, None).endswith("· 12 min active")


def test_the_slack_parent_shows_the_usage_and_the_budget() -> None:
    view = ProgressView(
        work_item_id="github:o/r#1",
        status="running",
        walk=Walk(pointer="design"),
        usage=usage_line(COUNTS, 3.8412, 12),
        budget="**Budget:** tokens 1.02M of 2M · $3.84 of $20.00",
    )
    payload = {**mirror_payload(view), "repo": "o/r", "issue_number": 1, "title": "Fix it"}
    body = progress(payload, "https://github.com/o/r/issues/1")[1][1]["text"]["text"]
    assert (
        "*Usage:* 1.0M tokens (in 980k · out 41k · cache 0) · $3.84 · 57 requests · 12 min" in body
    )
    assert "*Budget:* tokens 1.02M of 2M · $3.84 of $20.00" in body
    quiet = {**payload, "usage": "", "budget": ""}
    shown = progress(quiet, "https://github.com/o/r/issues/1")[1][1]["text"]["text"]
    assert "Usage" not in shown and "Budget" not in shown


def test_the_status_page_words_usage_with_requests_tool_calls_and_time() -> None:
    counts = {**COUNTS, "tool_calls": 12}
    words = usage_words(counts, 3.8412, 37)
    assert words == (
        "1.0M tokens (in 980k · out 41k · cache 0) · $3.84 · 57 requests · 12 tool calls · 37 min"
    )
    assert usage_words(dict.fromkeys(counts, 0), None, 3) == ""


def test_usage_and_cost_add_up_by_harness_and_model() -> None:
    config = parse_config({"models": [{"name": "cheap", "price": {"input": 1, "output": 2}}]})
    one = {"input_tokens": 1_000_000, "output_tokens": 500_000, "requests": 3}
    rows = [
        (one, {"model": "cheap", "harness": "claude"}, {}),
        (one, {"model": "cheap"}, {"harness": "claude"}),  # the harness it ran on
        (one, {"model": "mystery"}, None),
        (one, None, None),
    ]
    found = by_choice(rows, config)
    counts, dollars = found[("claude", "cheap")]
    assert counts["input_tokens"] == 2_000_000 and counts["requests"] == 6 and dollars == 4.0
    assert found[("default", "mystery")][1] is None  # no price: no cost
    assert found[("default", "default")][0]["output_tokens"] == 500_000


def test_an_item_its_budget_stopped_says_so_in_the_comment_and_in_slack() -> None:
    view = ProgressView(
        work_item_id="github:o/r#1",
        status="stopped",
        walk=Walk(pointer="implementation"),
        budget="**Budget:** tokens 10.2k of 10k",
        budget_spent=True,
    )
    body = render_progress(view)
    assert "**Session:** **stopped: budget** (an authorized `the-loop budget +<amount>`" in body
    assert "**Budget:** tokens 10.2k of 10k" in body
    payload = {**mirror_payload(view), "repo": "o/r", "issue_number": 1, "title": "Fix it"}
    text = progress(payload, "https://github.com/o/r/issues/1")[1][1]["text"]["text"]
    assert "*Session:* stopped: budget" in text and "*Budget:* tokens 10.2k of 10k" in text
