"""Pure rules behind the spawner API: event checks, agent comment text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.fleet.api_guard import ApiError, as_api_error
from app.fleet.comments import AgentComment, AgentCommentKind, CommentRefused, parse_request, render
from app.fleet.reports import check_event, event_fields
from app.gate.markers import find_marker, has_marker
from app.store.tables import Spawner
from app.workitems.decide.advance import UnseenArtifacts
from app.workitems.decide.followups import deliver_key
from app.workitems.decide.walk import MoveRefused
from app.workitems.prs.pulls import PullRequestRefused


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"event": "session.spawned", "work_item_id": "github:a/b#1"}, None),
        ({"event": "spawner.started"}, None),
        ([], "JSON object"),
        ({"event": "spawned"}, "dotted"),
        ({"event": "Session.Spawned"}, "dotted"),
        ({"event": "session.spawned; drop"}, "dotted"),
        ({"event": "session.exited", "work_item_id": 7}, "work_item_id"),
        ({"event": "session.exited", "blob": "x" * 70_000}, "smaller"),
    ],
)
def test_event_checks(raw, problem):
    why = check_event(raw)
    assert (why is None) if problem is None else (problem in why)


def test_event_fields_keep_what_was_reported_and_name_the_spawner():
    spawner = Spawner(id=3, name="box", token_hash="h", repositories=["*"], harnesses=[])
    fields = event_fields(
        {"event": "session.spawned", "work_item_id": "w", "ts": "t", "session": "s", "model": "m"},
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
    ok = parse_request({"work_item_id": "github:a/b#1", "kind": "ask", "body": "why?"})
    assert ok == AgentComment("github:a/b#1", AgentCommentKind.ASK, "why?")
    for bad in (None, [], {"work_item_id": "", "kind": "comment", "body": "x"}):
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


@pytest.mark.parametrize(
    ("refused", "status", "code"),
    [
        (CommentRefused(409, "no installation"), 409, "conflict"),
        (PullRequestRefused(400, "the title must be 1 to 256 characters"), 400, "bad-request"),
        (MoveRefused("review waits for a human decision"), 422, "refused"),
        (MoveRefused("the App holds design", stale=True), 409, "stale-move"),
        (UnseenArtifacts("design is not done as the devbox sees it"), 425, "not-seen-yet"),
        (ApiError(503, "no installation token"), 503, "unavailable"),
    ],
)
def test_every_refusal_of_the_spawner_api_answers_one_shape(refused, status, code):
    error = as_api_error(refused)
    assert (error.status, error.code, str(error)) == (status, code, str(refused))
