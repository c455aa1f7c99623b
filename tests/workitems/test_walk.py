"""The walk through the phases as the App holds it (pure): where `phase next` goes, where a
human gate holds the pointer, where requested changes send it, what the progress comment
shows, and what the session is told after a decision."""

from __future__ import annotations

import pytest

from app.workitems.decide.review import ReviewVerdict, session_note
from app.workitems.decide.walk import (
    MoveRefused,
    PhaseState,
    Walk,
    changes_go_to,
    in_force,
    is_approval_gate,
    is_decision_gate,
    next_move,
    phase_rows,
)

NO_STOPS = frozenset({"brainstorming", "approve-design", "approve-tasks"})
STOP_AFTER_DESIGN = frozenset({"brainstorming", "approve-tasks"})


def test_without_the_rows_design_leads_straight_on() -> None:
    assert next_move(Walk("design", NO_STOPS), "design") == "test-planning"
    assert "approve-design" not in in_force(NO_STOPS)


def test_a_ticked_gate_holds_the_pointer_until_a_decision() -> None:
    assert next_move(Walk("design", STOP_AFTER_DESIGN), "design") == "approve-design"
    with pytest.raises(MoveRefused, match="approve-design waits for a human decision"):
        next_move(Walk("approve-design", STOP_AFTER_DESIGN), "approve-design")
    decided = Walk("approve-design", STOP_AFTER_DESIGN, {"approve-design": {"by": "op"}})
    assert next_move(decided, "approve-design") == "test-planning"


def test_which_gates_take_approve_and_changes() -> None:
    assert [is_decision_gate(n) for n in ("phase-selection", "approve-tasks", "review")] == [
        False,
        True,
        True,
    ]
    assert is_approval_gate("approve-design") and not is_approval_gate("review")


def test_changes_go_back_to_the_judged_phase_when_it_runs() -> None:
    assert changes_go_to("approve-design", STOP_AFTER_DESIGN) == "design"
    assert changes_go_to("approve-tasks", {"approve-design"}) == "tasks-breakdown"
    assert changes_go_to("review", NO_STOPS) == "implementation"
    assert changes_go_to("approve-tasks", {"tasks-breakdown"}) == "approve-tasks"


def test_the_progress_rows_show_a_waiting_gate_and_leave_out_unticked_ones() -> None:
    rows = dict(phase_rows(Walk("approve-design", STOP_AFTER_DESIGN)))
    assert rows["design"] is PhaseState.DONE
    assert rows["approve-design"] is PhaseState.WAITING
    assert "approve-tasks" not in rows and rows["brainstorming"] is PhaseState.SKIPPED
    assert "approve-design" not in dict(phase_rows(Walk("design", NO_STOPS)))


def test_the_session_is_told_how_to_go_on_or_where_it_is_back() -> None:
    approved = session_note(ReviewVerdict.APPROVED, "op", "approve-design", "test-planning")
    assert "@op approved `design` at `approve-design`" in approved
    assert "Run `the-loop phase next` to go on to `test-planning`" in approved
    review = session_note(ReviewVerdict.APPROVED, "op", "review", "complete")
    assert "approved the review" in review and "complete the work item" in review
    changes = session_note(ReviewVerdict.CHANGES, "op", "approve-design", "design")
    assert "requested changes at `approve-design`" in changes and "back at `design`" in changes
