"""Helpers for the gate's integration tests: the operator config fixture, deliveries of the
published fixture payloads, and reads of what the App stored and posted."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.gate.markers import MarkerKind, find_marker
from app.store.tables import Delivery, InboxState, Job, JobKind, Spawner, WorkItem
from app.workstate import read_state, state_path
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


def deliver(app: Any, event: str, payload: dict[str, Any], delivery: str) -> None:
    """Post a signed delivery and wait until the worker has handled it without error."""
    assert post_webhook(app.url, event, payload, delivery=delivery).status_code == 202

    def settled() -> Delivery | None:
        with app.state.sessions() as s:
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


def progress_of(fake: Any, number: int = 1) -> str:
    """The body of the App's one progress comment on issue `number`, found by its marker
    ("" before it is posted: the publisher coalesces)."""
    found = [
        c
        for c in fake.issue_comments(REPO, number)
        if (m := find_marker(c["body"])) and m.kind == MarkerKind.PROGRESS
    ]
    assert len(found) <= 1
    return str(found[0]["body"]) if found else ""


def state_node(checkout: Path, spec: str = "issue-1") -> str:
    """The node a checkout's work-item state file points at ("" when it has none)."""
    state = read_state(state_path(checkout, spec))
    return state.currentNode if state else ""


def engine_of(app: Any) -> Any:
    """The engine of a RunningApp or of an AppState."""
    return app.engine if hasattr(app, "engine") else app.state.engine


def item_row(app: Any) -> WorkItem:
    with Session(engine_of(app)) as s:
        row = s.get(WorkItem, ITEM)
        assert row is not None
        s.expunge(row)
        return row


def jobs(app: Any, kind: JobKind | None = None) -> list[Job]:
    with Session(engine_of(app)) as s:
        query = select(Job).order_by(Job.id)
        if kind is not None:
            query = query.where(Job.kind == kind)
        rows = list(s.scalars(query))
        for row in rows:
            s.expunge(row)
        return rows


def register_spawner(app: Any, harnesses: list[str]) -> None:
    with app.state.sessions() as s, s.begin():
        s.add(
            Spawner(
                name="devbox",
                token_hash="h" * 64,
                repositories=[REPO],
                serves=[REPO],
                harnesses=harnesses,
            )
        )
