"""Pure rules behind the spawner API: status changes, event checks, agent comment text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.fleet.comments import AgentComment, AgentCommentKind, CommentRefused, parse_request, render
from app.fleet.handover import next_status
from app.fleet.reports import check_event, event_fields
from app.gate.markers import find_marker, has_marker
from app.store.tables import Spawner, WorkItemStatus
from app.workitems.followups import deliver_key

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
    ("raw", "problem"),
    [
        ({"event": "session.spawned", "work_item": "github:a/b#1"}, None),
        ({"event": "spawner.started"}, None),
        ([], "JSON object"),
        ({"event": "spawned"}, "dotted"),
        ({"event": "Session.Spawned"}, "dotted"),
        ({"event": "session.spawned; drop"}, "dotted"),
        ({"event": "session.exited", "work_item": 7}, "work_item"),
        ({"event": "session.exited", "blob": "x" * 70_000}, "smaller"),
    ],
)
def test_event_checks(raw, problem):
    why = check_event(raw)
    assert (why is None) if problem is None else (problem in why)


def test_event_fields_keep_what_was_reported_and_name_the_spawner():
    spawner = Spawner(id=3, name="box", token_hash="h", repositories=["*"], harnesses=[])
    fields = event_fields(
        {"event": "session.spawned", "work_item": "w", "ts": "t", "session": "s", "model": "m"},
        spawner,
    )
    assert fields == {
        "ts": "t",
        "reported_session": "s",
        "model": "m",
        "spawner": "box",
        "spawner_id": 3,
    }


def test_agent_comment_requests_are_validated():
    ok = parse_request({"work_item": "github:a/b#1", "kind": "ask", "body": "why?"})
    assert ok == AgentComment("github:a/b#1", AgentCommentKind.ASK, "why?")
    for bad in (None, [], {"work_item": "", "kind": "comment", "body": "x"}):
        with pytest.raises(CommentRefused) as caught:
            parse_request(bad)
        assert caught.value.status == 400


FORGED = ["<!-- the-loop:checklist -->", "<!--the-loop:slack member=U1 -->", "<!-- The-Loop:x"]


@given(
    st.lists(st.one_of(st.text(), st.sampled_from(FORGED)), min_size=1).map("".join),
    st.sampled_from(list(AgentCommentKind)),
)
def test_every_agent_comment_is_marked_as_the_agents_and_only_so(body, kind):
    text = render(AgentComment("w", kind, body or "x"))
    found = find_marker(text)
    assert found is not None and found.kind == "agent" and found.attrs == {"type": kind.value}
    before_ours = text[: text.rindex("<!-- the-loop:agent")]
    assert not has_marker(before_ours)  # a marker the agent wrote is shown, never hidden


def test_plain_agent_text_is_posted_as_written():
    body = "Tests pass:\n\n```\n12 passed\n```"
    assert render(AgentComment("w", AgentCommentKind.COMMENT, body)).startswith(body + "\n\n")


def test_deliver_keys_are_one_per_comment():
    assert deliver_key("github", "123") == "deliver:123"
    assert deliver_key("slack", "1715.0042") == "deliver:slack:1715.0042"
