"""Fair turns (app/store/lanes.py): a delivery's lane read from GitHub's published payloads,
turns that keep a quiet lane in arrival order and push only a flood back, and the inbox
worker handling a label on one issue while another issue's flood is still queued."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.github.ingest import IngestWriter
from app.github.router import Router
from app.github.services import HandlerContext
from app.github.worker import InboxWorker
from app.store import Sessions
from app.store.lanes import QUANTUM_MS, Turns, lane_of
from app.store.tables import Delivery, InboxState
from tests.support import fixture_json


def test_the_lane_is_the_issue_the_pull_request_or_the_repository() -> None:
    assert lane_of(fixture_json("github/issue_comment.created.json")) == "Codertocat/Hello-World#1"
    assert lane_of(fixture_json("github/issues.labeled.json")) == "Codertocat/Hello-World#1"
    pull = fixture_json("github/pull_request.opened.json")
    assert lane_of(pull) == f"{pull['repository']['full_name']}#{pull['pull_request']['number']}"
    review = fixture_json("github/pull_request_review_comment.created.json")
    assert lane_of(review).endswith(f"#{review['pull_request']['number']}")
    assert lane_of({"repository": {"full_name": "acme/web"}, "ref": "main"}) == "acme/web"
    assert lane_of(fixture_json("github/installation.created.json")) == ""
    assert lane_of({"repository": "not an object", "issue": {"number": 1}}) == ""


def test_a_quiet_lane_keeps_arrival_order_and_a_flood_only_pushes_itself_back() -> None:
    turns = Turns()
    now = 1_000_000
    assert turns.take("a/b#1", now) == now  # first of its lane: now
    assert turns.take("a/b#1", now + 5 * QUANTUM_MS) == now + 5 * QUANTUM_MS  # caught up
    flood = [turns.take("a/b#2", now) for _ in range(100)]
    assert flood == [now + i * QUANTUM_MS for i in range(100)]  # one share at a time
    assert turns.take("a/b#3", now + 1) == now + 1  # another issue is not behind the flood
    assert turns.take("", now + 2) == now + 2  # no lane: served at arrival


def test_lanes_back_at_present_time_are_forgotten_when_there_are_too_many() -> None:
    turns = Turns(max_lanes=3)
    for n in range(3):
        turns.take(f"a/b#{n}", 0)
    for _ in range(20):
        turns.take("a/b#flood", 0)  # its last turn, 19 shares ahead: remembered
    turns.take("a/b#new", 10 * QUANTUM_MS)
    assert len(turns) == 2  # the flood and the newest lane; the caught-up three are gone
    assert turns.take("a/b#flood", 10 * QUANTUM_MS) == 20 * QUANTUM_MS
    assert turns.take("a/b#0", 10 * QUANTUM_MS) == 10 * QUANTUM_MS


def comment_on(issue: int, n: int) -> bytes:
    return json.dumps(
        {
            "action": "created",
            "issue": {"number": issue},
            "comment": {"id": n},
            "repository": {"full_name": "acme/web"},
        }
    ).encode()


def test_a_label_on_one_issue_is_handled_before_another_issues_flood(store) -> None:
    engine, services, clock = store
    arrived = clock.now - timedelta(seconds=1)  # the flood and the label in the same instant
    writer = IngestWriter(engine, EventLog(None), clock=lambda: arrived)
    for n in range(200):
        writer.store(f"flood-{n}", "issue_comment", "created", comment_on(1, n), "acme/web#1")
    label = json.dumps({"action": "labeled", "issue": {"number": 2}}).encode()
    writer.store("label", "issues", "labeled", label, "acme/web#2")
    writer.close()
    handled: list[str] = []

    def record(ctx: HandlerContext) -> None:
        handled.append(ctx.delivery_id)

    worker = InboxWorker(
        services,
        Sessions(engine),
        Router({("issue_comment", "created"): [record], ("issues", "labeled"): [record]}),
    )
    assert worker.drain() == 201
    assert handled.index("label") == 1  # right after the flood's first, not 201st
    flood = [d for d in handled if d.startswith("flood-")]
    assert flood == [f"flood-{n}" for n in range(200)]  # one lane keeps its order
    with Session(engine) as session:
        states = set(session.scalars(select(Delivery.state)))
    assert states == {InboxState.DONE}
