"""`routing.autoExecuteLabels`: every listed label on the issue executes the work item with the
default selection, as if the labeller had replied with the execute keyword — and only when
the labeller may execute. Real database, the fake GitHub API, the App's own router."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from app.config.process_settings import load_settings
from app.gate.markers import MarkerKind
from app.github.services import HandlerContext
from app.runtime.app_state import AppState, build_state
from app.store.tables import Event, JobKind, WorkItemStatus
from tests.gate_support import (
    TRIGGER,
    checklist_comments,
    item_row,
    jobs,
    labeled,
    marked,
)
from tests.stopgate_support import NO_STOPS

pytestmark = pytest.mark.admin_token  # the operator may read /status

AUTO_YAML = f"""
models: [opus, {{name: sonnet, about: quick}}]
effort: [high, low]
routing:
  authorizedUsers: [Codertocat]
  autoExecuteLabels: ["{TRIGGER}", ready]
  control: {{keywords: {{execute: "/loop go"}}}}
"""


@pytest.fixture
def app_state(settings_env: dict[str, str]) -> Iterator[AppState]:
    built = build_state(load_settings(settings_env, dotenv=None))
    yield built
    built.close()


def label_event(label: str, on_issue: list[str], sender: str = "Codertocat") -> dict[str, Any]:
    payload = labeled(label)
    payload["issue"] = {**payload["issue"], "labels": [{"name": n} for n in on_issue]}
    payload["sender"] = {**payload["sender"], "login": sender}
    return payload


def handle(state: AppState, payload: dict[str, Any], delivery: str) -> None:
    with state.sessions(expire_on_commit=False) as session, session.begin():
        body = json.dumps(payload).encode()
        ctx = HandlerContext(state.services, session, delivery, "issues", "labeled", body)
        state.router.dispatch(ctx)


def events(state: AppState, name: str) -> list[dict[str, Any]]:
    with state.sessions() as session:
        rows = session.scalars(select(Event).where(Event.event == name).order_by(Event.id))
        return [row.data for row in rows]


@pytest.mark.parametrize("operator_yaml", [AUTO_YAML])
def test_all_labels_present_when_the_trigger_arrives_executes_with_the_defaults(
    app_state, fake_github
):
    fake, _ = fake_github
    handle(app_state, label_event(TRIGGER, ["bug", TRIGGER, "Ready"]), "d-1")
    item = item_row(app_state)
    assert item.state == WorkItemStatus.FROZEN
    assert (
        item.frozen is not None
        and item.frozen["decisions"]["phase-selection"]["by"] == "Codertocat"
    )
    # The checklist as posted: no model or effort choice, the opt-in phase left unticked.
    assert (item.frozen["model"], item.frozen["effort"]) == ("", "")
    assert set(item.frozen["skips"]) == {"brainstorming", *NO_STOPS}
    (spawn,) = jobs(app_state, JobKind.SPAWN)
    assert spawn.key == "spawn:label:d-1"
    app_state.progress.drain()  # the confirmation, posted after the execute committed
    assert len(marked(fake, MarkerKind.CONFIRMATION)) == 1
    assert "`/loop go`" in checklist_comments(fake)[0]["body"]  # the alias is the keyword
    assert "`model-sonnet` — quick" in checklist_comments(fake)[0]["body"]

    handle(app_state, label_event("ready", ["bug", TRIGGER, "ready"]), "d-2")  # again: nothing new
    app_state.progress.drain()
    assert (
        len(jobs(app_state, JobKind.SPAWN)) == 1 and len(marked(fake, MarkerKind.CONFIRMATION)) == 1
    )


@pytest.mark.parametrize("operator_yaml", [AUTO_YAML])
def test_the_last_listed_label_executes_an_item_parked_at_the_gate(app_state, fake_github):
    handle(app_state, label_event(TRIGGER, [TRIGGER]), "d-1")
    assert item_row(app_state).state == WorkItemStatus.PARKED and jobs(app_state) == []
    handle(app_state, label_event("bug", [TRIGGER, "bug"]), "d-2")  # not a listed label
    assert item_row(app_state).state == WorkItemStatus.PARKED
    handle(app_state, label_event("ready", [TRIGGER, "bug", "ready"]), "d-3")
    assert item_row(app_state).state == WorkItemStatus.FROZEN
    assert [j.key for j in jobs(app_state, JobKind.SPAWN)] == ["spawn:label:d-3"]
    assert [e["by"] for e in events(app_state, "gate.auto_execute")] == ["Codertocat"]


@pytest.mark.parametrize("operator_yaml", [AUTO_YAML])
def test_an_unauthorized_labeller_executes_nothing(app_state, fake_github):
    fake, _ = fake_github
    handle(app_state, label_event(TRIGGER, [TRIGGER, "ready"], sender="mallory"), "d-1")
    assert item_row(app_state).state == WorkItemStatus.PARKED and jobs(app_state) == []
    (refused,) = events(app_state, "gate.refused")
    assert refused["who"] == "mallory" and refused["source"] == "label"
    assert refused["reason"] == "unauthorized"
    assert marked(fake, MarkerKind.CONFIRMATION) == []


@pytest.mark.parametrize("operator_yaml", ["routing: {authorizedUsers: [Codertocat]}\n"])
def test_without_auto_execute_labels_a_label_only_parks(app_state, fake_github):
    handle(app_state, label_event(TRIGGER, [TRIGGER, "ready"]), "d-1")
    assert item_row(app_state).state == WorkItemStatus.PARKED and jobs(app_state) == []
    assert events(app_state, "gate.auto_execute") == []
