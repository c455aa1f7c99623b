"""The lifecycle's one transition table: what each happening does from each status."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.store.tables import WorkItem, WorkItemStatus
from app.workitems.flow.states import LIVE, TABLE, Happened, next_status, transition

S = WorkItemStatus
HAPPENINGS = [
    "spawn.claimed",
    "spawn.ok",
    "spawn.failed",
    "deliver.respawned",
    "stop.ok",
    "session.spawned",
    "session.respawned",
    "session.stalled",
    "session.exited",
    "session.delivered",
    "workspace.trusted",
]


@pytest.mark.parametrize(
    ("current", "happened", "expected"),
    [
        (S.FROZEN, "spawn.claimed", S.SPAWNING),
        (S.EXITED, "spawn.claimed", None),  # a re-offered spawn does not hide the exit
        (S.SPAWNING, "spawn.ok", S.RUNNING),
        (S.SPAWNING, "spawn.failed", S.EXITED),
        (S.STALLED, "spawn.ok", None),  # the watchdog saw the new session wait on a prompt
        (S.RUNNING, "session.stalled", S.STALLED),
        (S.STALLED, "session.respawned", S.RUNNING),
        (S.STALLED, "session.unstalled", S.RUNNING),  # answered in tmux by a human
        (S.EXITED, "deliver.respawned", S.RUNNING),
        (S.RUNNING, "session.exited", S.EXITED),
        (S.RUNNING, "stop.ok", S.STOPPED),
        (S.STALLED, "stop.ok", S.STOPPED),
        (S.CLOSED, "stop.ok", None),
        (S.RUNNING, "session.delivered", None),
        (S.RUNNING, "session.spawned", None),  # already so
    ],
)
def test_status_changes(current, happened, expected):
    assert next_status(current, happened) == expected


@given(st.sampled_from([S.STOPPED, S.CLOSED, S.UNLABELED, S.PARKED]), st.sampled_from(HAPPENINGS))
def test_nothing_revives_an_ended_item(current, happened):
    after = next_status(current, happened)
    assert after in (None, S.STOPPED)


@given(st.sampled_from(list(S)), st.sampled_from(HAPPENINGS))
def test_a_stalled_report_is_never_shown_as_running_by_a_first_start(current, happened):
    if current == S.STALLED and happened in ("spawn.ok", "session.spawned"):
        assert next_status(current, happened) is None


@pytest.mark.parametrize(
    ("current", "happened", "expected"),
    [
        (S.UNLABELED, Happened.RELABELED, S.PARKED),
        (S.CLOSED, Happened.RELABELED, S.PARKED),
        (S.RUNNING, Happened.RELABELED, None),
        (S.PARKED, Happened.UNLABELED, S.UNLABELED),
        (S.FROZEN, Happened.UNLABELED, None),  # after execute the label no longer matters
        (S.PARKED, Happened.EXECUTED, S.FROZEN),
        (S.UNLABELED, Happened.EXECUTED, None),
        (S.RUNNING, Happened.CLOSED, S.STOPPED),
        (S.EXITED, Happened.CLOSED, S.STOPPED),
        (S.PARKED, Happened.CLOSED, S.CLOSED),
        (S.DONE, Happened.CLOSED, None),
        (S.RUNNING, Happened.COMPLETED, S.DONE),
        (S.PARKED, Happened.COMPLETED, None),
        (S.DONE, "session.exited", None),
        (S.RUNNING, "no.such.thing", None),
    ],
)
def test_lifecycle_changes(current, happened, expected):
    assert next_status(current, happened) == expected


def test_every_rule_targets_a_status_and_every_live_status_can_end():
    for rules in TABLE.values():
        assert all(rule.target in set(S) and rule.sources for rule in rules)
    for status in LIVE:
        assert next_status(status, Happened.CLOSED) == S.STOPPED


def test_transition_changes_the_row_only_when_the_table_allows():
    row = WorkItem(state=S.PARKED)
    assert transition(row, Happened.EXECUTED) == S.FROZEN and row.state == S.FROZEN
    assert transition(row, Happened.EXECUTED) is None and row.state == S.FROZEN
    assert transition(None, Happened.EXECUTED) is None


@pytest.mark.parametrize(
    ("current", "happened", "expected"),
    [
        (S.RUNNING, Happened.SPAWNER_DEAD, S.LOST),
        (S.STALLED, Happened.SPAWNER_DEAD, S.LOST),
        (S.SPAWNING, Happened.SPAWNER_DEAD, None),  # no session yet: its spawn is offered again
        (S.EXITED, Happened.SPAWNER_DEAD, None),  # nothing runs to be lost
        (S.LOST, Happened.SPAWNER_DEAD, None),
        (S.LOST, Happened.SESSION_ALIVE, S.RUNNING),  # its spawner came back with it
        (S.RUNNING, Happened.SESSION_ALIVE, None),
        (S.LOST, Happened.EXECUTED, S.FROZEN),  # a person runs it again
        (S.LOST, "session.exited", S.EXITED),  # the next spawner ended what was left
        (S.LOST, Happened.CLOSED, S.STOPPED),
        (S.LOST, Happened.PR_MERGED, S.DONE),
        (S.LOST, "stop.ok", S.STOPPED),
        (S.LOST, "spawn.claimed", None),  # a stale spawn offer does not restart it
        (S.LOST, "session.stalled", None),
    ],
)
def test_a_lost_session_waits_for_its_spawner_or_a_person(current, happened, expected):
    assert next_status(current, happened) == expected


def test_lost_is_not_live():
    assert S.LOST not in LIVE  # a dead spawner's session is counted nowhere as running
