"""The gate end to end: real fixture payloads, signed, through the real Flask server and inbox
worker, against the fake GitHub REST server and a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.gate.markers import MarkerKind, find_marker
from app.store.models import Delivery, InboxState, Job, JobKind, Spawner, WorkItem, WorkItemStatus
from tests.support import fixture_json, post_webhook, wait_for, with_installation

REPO = "Codertocat/Hello-World"
ITEM = f"github:{REPO}#1"
TRIGGER = "the-loop: auto-execute"

TWO_HARNESSES = """
harnesses:
  - {name: claude, default: true}
  - {name: codex}
models:
  - {name: opus}
  - {name: sonnet, harnesses: [claude]}
effort: [low, high]
"""


@pytest.fixture
def operator_yaml() -> str:
    return "{}\n"


@pytest.fixture
def settings_env(settings_env: dict[str, str], operator_yaml: str) -> dict[str, str]:
    """The conftest environment with this test's operator config written before the App."""
    with open(settings_env["THE_LOOP_CONFIG"], "w") as fh:
        fh.write(operator_yaml)
    return settings_env


def deliver(app: Any, event: str, payload: dict[str, Any], delivery: str) -> None:
    """Post a signed delivery and wait until the worker has handled it without error."""
    assert post_webhook(app.url, event, payload, delivery=delivery).status_code == 202

    def settled() -> Delivery | None:
        with Session(app.state.engine) as s:
            row = s.scalars(select(Delivery).where(Delivery.delivery_id == delivery)).one()
            return row if row.state != InboxState.QUEUED or row.last_error else None

    row = wait_for(settled)
    assert row.state == InboxState.DONE, row.last_error


def labeled(label: str = TRIGGER) -> dict[str, Any]:
    payload = with_installation(fixture_json("github/issues.labeled.json"))
    payload["label"] = {**payload["label"], "name": label}
    return payload


def unlabeled() -> dict[str, Any]:
    payload = with_installation(fixture_json("github/issues.unlabeled.json"))
    payload["label"] = {**payload["label"], "name": TRIGGER}
    return payload


def comment(body: str, *, login: str = "Codertocat", cid: int = 492700400) -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json("github/issue_comment.created.with-installation.json"))
    payload["comment"].update(body=body, id=cid)
    payload["comment"]["user"]["login"] = login
    return payload


def checklist_comments(fake: Any) -> list[dict[str, Any]]:
    return [
        c
        for c in fake.issue_comments(REPO, 1)
        if (m := find_marker(c["body"])) and m.kind == MarkerKind.CHECKLIST
    ]


def marked(fake: Any, kind: MarkerKind) -> list[dict[str, Any]]:
    return [
        c for c in fake.issue_comments(REPO, 1) if (m := find_marker(c["body"])) and m.kind == kind
    ]


def item_row(app: Any) -> WorkItem:
    with Session(app.state.engine) as s:
        row = s.get(WorkItem, ITEM)
        assert row is not None
        s.expunge(row)
        return row


def jobs(app: Any, kind: JobKind | None = None) -> list[Job]:
    with Session(app.state.engine) as s:
        query = select(Job).order_by(Job.id)
        if kind is not None:
            query = query.where(Job.kind == kind)
        rows = list(s.scalars(query))
        for row in rows:
            s.expunge(row)
        return rows


def register_spawner(app: Any, harnesses: list[str]) -> None:
    with Session(app.state.engine) as s, s.begin():
        s.add(Spawner(name="devbox", token_hash="h" * 64, repositories=[REPO], harnesses=harnesses))


def test_label_posts_exactly_one_checklist(running_app, fake_github):
    fake, _ = fake_github
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issues", labeled(), "label-2")  # a second label event
    post_webhook(running_app.url, "issues", labeled(), delivery="label-1")  # a redelivery

    posted = checklist_comments(fake)
    assert len(posted) == 1
    assert "- [x] `design`" in posted[0]["body"] and "the-loop execute" in posted[0]["body"]
    item = item_row(running_app)
    assert item.state == WorkItemStatus.PARKED and item.checklist_comment_id == posted[0]["id"]
    assert item.clone_url == "https://github.com/Codertocat/Hello-World.git"
    assert [e["work_item"] for e in running_app.events("workitem.created")] == [ITEM]
    assert len(running_app.events("gate.checklist_posted")) == 1
    deferred = running_app.events("session.spawn_deferred")
    assert deferred and deferred[0]["reason"] == "parked-at-human-start-gate"
    assert [r["content"] for r in fake.reactions] == ["eyes"]


def test_other_labels_start_nothing(running_app, fake_github):
    fake, _ = fake_github
    deliver(running_app, "issues", labeled("bug"), "label-bug")
    assert fake.issue_comments(REPO, 1) == []
    assert running_app.events("workitem.created") == []


def test_unauthorized_execute_is_refused_once(running_app, fake_github):
    fake, _ = fake_github
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issue_comment", comment("the-loop execute"), "exec-1")
    deliver(running_app, "issue_comment", comment("the-loop execute"), "exec-1-again")

    refused = running_app.events("gate.refused")
    assert len(refused) == 2 and refused[0]["who"] == "Codertocat"
    assert "'read' permission" in refused[0]["why"]
    replies = marked(fake, MarkerKind.REFUSAL)
    assert len(replies) == 1
    assert "write, maintain or admin" in replies[0]["body"]
    assert jobs(running_app) == []
    assert item_row(running_app).state == WorkItemStatus.PARKED
    assert item_row(running_app).frozen is None


@pytest.mark.parametrize("operator_yaml", [TWO_HARNESSES])
def test_authorized_execute_freezes_confirms_and_queues_one_spawn(running_app, fake_github):
    fake, _ = fake_github
    register_spawner(running_app, ["claude", "codex"])
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    assert "- [x] `harness-claude`" in checklist_comments(fake)[0]["body"]

    reply = (
        "The-Loop Execute\n\n- [ ] design\n- [x] `harness-codex`\n- [ ] harness-claude\n"
        "- [x] model-sonnet\n> - [x] effort-high\n- [x] harness-rm-rf\n"
    )
    deliver(running_app, "issue_comment", comment(reply), "exec-1")
    deliver(running_app, "issue_comment", comment(reply), "exec-1-redelivered")

    item = item_row(running_app)
    assert item.state == WorkItemStatus.FROZEN
    frozen = item.frozen or {}
    assert (frozen["harness"], frozen["model"], frozen["effort"]) == ("codex", "", "high")
    assert frozen["skips"] == {
        "design": {"by": "Codertocat"},
        "brainstorming": {"by": "Codertocat"},
    }
    assert frozen["decisions"]["phase-selection"]["by"] == "Codertocat"
    assert [d["token"] for d in frozen["dropped"]] == ["model-sonnet"]

    confirmations = marked(fake, MarkerKind.CONFIRMATION)
    assert len(confirmations) == 1
    text = confirmations[0]["body"]
    assert "**Harness:** `codex`" in text and "**Effort:** `high`" in text
    assert "**Model:** the default" in text and "`model-sonnet`" in text
    assert "rm-rf" not in text

    spawns = jobs(running_app, JobKind.SPAWN)
    assert len(spawns) == 1
    payload = spawns[0].payload
    assert payload["frozen"] == frozen and payload["clone_url"].endswith("Hello-World.git")
    assert (payload["gh_event"], payload["action"]) == ("issue_comment", "created")
    assert payload["spec_id"] == "issue-1" and payload["installation_id"] == 1
    assert "Spelling error in the README file" in payload["prompt"]
    assert len(running_app.events("job.queued")) == 1
    assert len(running_app.events("gate.frozen")) == 1
    assert running_app.events("gate.execute_ignored")[0]["reason"] == "already-frozen"
