"""The App's count of a session's stop-gate attempts (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.workitems.decide.gate_counts import next_attempt

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_attempts_grow_once_per_gap_and_start_again_on_a_move_or_another_node():
    attempt, kept = next_attempt(None, 4, "design", NOW, gap=20)
    assert attempt == 1
    assert next_attempt(kept, 4, "design", NOW + timedelta(seconds=5), gap=20) == (1, kept)
    attempt, kept = next_attempt(kept, 4, "design", NOW + timedelta(seconds=20), gap=20)
    assert attempt == 2
    assert next_attempt(kept, 5, "design", NOW + timedelta(seconds=21), gap=20)[0] == 1
    assert next_attempt(kept, 4, "verification", NOW + timedelta(seconds=21), gap=20)[0] == 1


def test_a_record_that_is_not_ours_counts_from_the_start():
    for junk in ({"epoch": 4, "node": "design", "attempts": "99"}, {"attempts": -3}, {}):
        assert next_attempt(junk, 4, "design", NOW, gap=20)[0] == 1
    bad_time = {"epoch": 4, "node": "design", "attempts": 2, "at": "yesterday"}
    assert next_attempt(bad_time, 4, "design", NOW, gap=20)[0] == 3
