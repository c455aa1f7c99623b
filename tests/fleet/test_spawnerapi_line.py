"""An issue closing while a spawner takes the head of the line, on PostgreSQL.

Both move the line of waiting items: the claim renumbers every item behind the one it takes,
the close renumbers the items behind the one that leaves. The close locks its item; the
claim's renumbering writes that item. If the close took its item before the line and the
claim took the line before the item, each would wait for the other until PostgreSQL failed
one of them as a deadlock (the spawner's poll answered with an error, or the delivery
retried). A third connection holds the close at the point between its item and its stop
job, so the claim arrives exactly there, every run."""

from __future__ import annotations

import copy
import threading
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.protocol import parse_payload
from app.store.jobqueue import queue_job
from app.store.tables import JobKind, JobState, WorkItemStatus
from app.workitems.flow.capacity import QUEUE_KEY
from tests.spawnerapi_support import Api, inbox_rows
from tests.support import fixture_json, post_webhook, wait_for

pytestmark = pytest.mark.parametrize(
    "shared_api", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
SHARED_API = {"lease_seconds": 600}


def issue_closed(repo: str, number: int) -> dict[str, Any]:
    """The published issues.closed payload, re-pointed at `repo#number`."""
    payload = copy.deepcopy(fixture_json("github/issues.closed.json"))
    owner, name = repo.split("/")
    payload["repository"].update(full_name=repo, name=name)
    payload["repository"]["owner"]["login"] = owner
    payload["issue"]["number"] = number
    return payload


def blocked_by(api: Api, pid: int) -> list[int]:
    """The backends of this database that wait for a lock `pid` holds."""
    with api.state.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND :pid = ANY(pg_blocking_pids(pid))"
            ),
            {"pid": pid},
        )
        return [int(row[0]) for row in rows]


def test_a_close_and_a_claim_moving_the_line_together_both_succeed(api: Api) -> None:
    head, closing = api.work_item(1), api.work_item(2)
    taken = api.queue(JobKind.SPAWN, "spawn", head)
    cancelled = api.queue(JobKind.SPAWN, "spawn", closing)
    spawner = api.spawner(api.token())
    assert spawner.register(repositories=[api.repo]).status_code == 200
    delivery = str(uuid.uuid4())
    holder = api.state.sessions()
    try:  # the close's stop job waits for this uncommitted one with its key
        stop = parse_payload(JobKind.STOP, {"work_item_id": closing, "repo": api.repo})
        queue_job(holder, f"stop:{delivery}", stop)
        holder_pid = int(holder.execute(text("SELECT pg_backend_pid()")).scalar_one())
        closed = post_webhook(api.url, "issues", issue_closed(api.repo, 2), delivery=delivery)
        assert closed.status_code == 202, closed.text
        (close_pid,) = wait_for(lambda: blocked_by(api, holder_pid))
        answers: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answers.append(spawner.poll()), daemon=True)
        poll.start()
        wait_for(lambda: blocked_by(api, close_pid))  # the claim waits for the close
    finally:
        holder.rollback()
        holder.close()
    poll.join(timeout=60)
    assert answers and answers[0].status_code == 200, answers[0].text if answers else "no answer"
    assert answers[0].json()["job"]["id"] == taken
    wait_for(lambda: inbox_rows(api, delivery)[0].state == "done")
    row = inbox_rows(api, delivery)[0]
    assert (row.attempts, row.last_error) == (1, None)  # handled once, never a deadlock victim
    assert api.item(head).state == WorkItemStatus.SPAWNING
    assert api.item(closing).state == WorkItemStatus.STOPPED
    assert api.job(cancelled).state == JobState.DONE
    assert QUEUE_KEY not in (api.item(head).session or {})
    assert api.events("job.offer_failed", head) == []


def test_a_spawn_whose_issue_closed_while_it_was_held_is_withdrawn_not_launched(
    api: Api,
) -> None:
    closed_item, next_item = api.work_item(1), api.work_item(2)
    orphan = api.queue(JobKind.SPAWN, "spawn", closed_item)
    wanted = api.queue(JobKind.SPAWN, "spawn", next_item)
    spawner = api.spawner(api.token())
    assert spawner.register(repositories=[api.repo]).status_code == 200
    delivery = str(uuid.uuid4())
    holder = api.state.sessions()
    try:  # the spawn's row is held (as a claim in flight holds it): the close skips it
        holder.execute(text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": orphan})
        closed = post_webhook(api.url, "issues", issue_closed(api.repo, 1), delivery=delivery)
        assert closed.status_code == 202, closed.text
        wait_for(lambda: inbox_rows(api, delivery)[0].state == "done")
    finally:
        holder.rollback()
        holder.close()
    assert api.item(closed_item).state == WorkItemStatus.STOPPED
    assert api.job(orphan).state == JobState.QUEUED  # the close could not cancel it
    answer = spawner.poll()
    assert answer.status_code == 200, answer.text
    assert answer.json()["job"]["id"] == wanted  # the closed issue's spawn is passed over
    assert (api.job(orphan).state, api.job(orphan).result) == (
        JobState.DONE,
        {"cancelled": "item-stopped"},
    )
    assert [e["job"] for e in api.events("job.withdrawn", closed_item)] == [orphan]
    assert api.item(closed_item).state == WorkItemStatus.STOPPED
