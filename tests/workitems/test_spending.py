"""The App keeping a work item's budget, over its real spawner API and store: what each
`session.usage` report leads to — one wrap-up notice at 90 %, one budget stop at 100 %, both
keyed so a repeated or later report adds nothing — and what a raise does, by whom."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from app.store.tables import Job, JobKind, Spawner, WorkItem, WorkItemStatus
from app.workitems.decide.decisions import Decision, Status
from app.workitems.spend.spending import raise_reply, restart_run
from tests.spawnerapi_support import serve_api

CONFIG = """
models:
  - {name: pricey, id: pricey-1, price: {input: 1000, output: 1000}}
routing:
  budget: {tokens: 1000, usd: 0.5}
"""
SHARED_API = {"config_yaml": CONFIG}  # how serve_api runs this module's App
pytestmark = pytest.mark.sqlite_only


def report(api: Any, item: str, **counts: int) -> None:
    spawner = api.spawner(api.token())
    event = {"event": "session.usage", "work_item_id": item, "id": uuid.uuid4().hex, **counts}
    answer = spawner.events(event)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text


def jobs(api: Any, item: str) -> list[tuple[str, dict[str, Any]]]:
    with api.session() as db:
        rows = db.scalars(select(Job).where(Job.work_item_id == item).order_by(Job.id))
        return [(row.kind, dict(row.payload)) for row in rows]


def test_warned_once_at_90_percent_then_stopped_once_at_100(api) -> None:
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, item, input_tokens=850, requests=1)
    assert jobs(api, item) == []
    report(api, item, input_tokens=40, output_tokens=20, requests=1)  # 910 of 1000
    report(api, item, input_tokens=10, requests=1)  # still warned: nothing new
    ((kind, notice),) = jobs(api, item)
    assert kind == JobKind.DELIVER and notice["source"] == "notice"
    assert notice["body"].startswith("the-loop: budget — ") and "tokens 910 of 1k" in notice["body"]
    report(api, item, output_tokens=80, requests=1)  # 1000 of 1000
    report(api, item, output_tokens=80, requests=1)  # past it, again
    kinds = [(k, p.get("reason")) for k, p in jobs(api, item)]
    assert kinds == [(JobKind.DELIVER, None), (JobKind.STOP, "budget")]
    stop = jobs(api, item)[1][1]
    assert (
        stop["note"].startswith("the-loop: budget spent (tokens 1k of 1k")
        and "+<amount>" in stop["note"]
    )
    (spent,) = api.events("budget.spent", item)
    assert spent["limit"] == "tokens"
    assert api.item(item).budget["stops"] == 1


def test_a_report_that_jumps_past_the_limit_stops_without_a_warning(api) -> None:
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, item, cache_read_input_tokens=5000, requests=1)
    assert [(k, p.get("reason")) for k, p in jobs(api, item)] == [(JobKind.STOP, "budget")]
    assert api.events("budget.warned", item) == []


def test_dollars_count_at_the_frozen_model_price_and_an_ended_item_is_left_alone(api) -> None:
    priced = api.work_item(1, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        row = db.get(WorkItem, priced)
        row.frozen = {**row.frozen, "model": "pricey"}
    report(api, priced, input_tokens=460, requests=1)  # $0.46 of $0.50, 46 % of the tokens
    ((kind, notice),) = jobs(api, priced)
    assert kind == JobKind.DELIVER and "$0.46 of $0.50" in notice["body"]
    (warned,) = api.events("budget.warned", priced)
    assert warned["limit"] == "usd"

    stopped = api.work_item(2, status=WorkItemStatus.STOPPED)
    report(api, stopped, input_tokens=5000, requests=1)
    assert jobs(api, stopped) == []


def test_a_raise_by_an_authorized_person_relaunches_an_item_its_budget_stopped(api) -> None:
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, item, input_tokens=1200, requests=1)
    with api.session() as db, db.begin():  # the spawner stopped it (its job's result)
        row = db.get(WorkItem, item)
        row.state = WorkItemStatus.STOPPED
    api.fake.grant(api.repo, "boss", "maintain")
    services = api.state.services

    def said(author: str, body: str, ref: str) -> str:
        with api.session() as db, db.begin():
            decision = Decision(item, author, body, ref, "github", int(ref))
            return raise_reply(services, db, decision).status.value

    assert said("stranger", "the-loop budget +1k", "101") == "refused"
    assert said("boss", "the-loop budget +30min", "102") == "refused"  # no minutes limit set
    assert said("boss", "the-loop budget +lots", "103") == "refused"
    assert api.item(item).state == WorkItemStatus.STOPPED
    assert said("boss", "the-loop budget +100", "104") == "recorded"  # 1200 of 1100: still spent
    assert api.item(item).state == WorkItemStatus.STOPPED
    assert said("boss", "the-loop budget +1k", "105") == "recorded"
    assert said("boss", "the-loop budget +1k", "105") == "repeat"  # the same comment again
    after = api.item(item)
    assert after.state == WorkItemStatus.EXITED and after.budget["extra"] == {"tokens": 1100.0}
    assert [(r["by"], r["amount"]) for r in after.budget["raises"]] == [
        ("boss", 100),
        ("boss", 1000),
    ]
    relaunch = [p for k, p in jobs(api, item) if k == JobKind.DELIVER]
    assert len(relaunch) == 1 and relaunch[0]["body"].startswith("the-loop: budget raised by @boss")
    refusals = [e["reason"] for e in api.events("gate.refused", item)]
    assert refusals == ["unauthorized", "no-limit", "bad-amount"]
    bodies = [c["body"] for c in api.fake.issue_comments(api.repo, 1)]
    assert any(
        "@boss added 1k tokens to this item's budget" in b and "relaunched" in b for b in bodies
    )


@pytest.fixture(scope="module")
def timed_api(tmp_path_factory, app_private_key):
    directory = tmp_path_factory.mktemp("spending-minutes")
    yield from serve_api(
        "sqlite", directory, app_private_key, config_yaml="routing: {budget: {minutes: 60}}\n"
    )


def test_a_minutes_budget_stops_a_session_that_spends_time_without_the_model(timed_api) -> None:
    """Minutes are the sessions' own: 40 before, 21 in the one that runs; waits between
    them do not count."""
    api = timed_api.fresh()
    spawner = api.spawner(api.token())
    registered = spawner.register(harnesses=["claude"])
    assert registered.status_code == 200
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        found = db.get(Spawner, registered.json()["spawner_id"])
        assert found is not None
        found.last_seen = None  # its next poll is its once-a-minute look
        row = db.get(WorkItem, item)
        assert row is not None
        launched = datetime.now(UTC) - timedelta(minutes=21)  # its session, still running
        row.session = {  # it hosts the item's session; two earlier ones ran 40 minutes
            "spawner_id": found.id,
            "launched_at": launched.isoformat(),
            "wall_seconds": 40 * 60,
        }
    assert spawner.poll().status_code in (200, 204)
    assert [(k, p.get("reason")) for k, p in jobs(api, item)] == [(JobKind.STOP, "budget")]
    assert "61 of 60 min" in jobs(api, item)[0][1]["note"]


def test_a_raise_while_the_budget_stop_is_on_its_way_relaunches_once_it_lands(api) -> None:
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, item, input_tokens=1500, requests=1)
    api.fake.grant(api.repo, "boss", "maintain")
    with api.session() as db, db.begin():
        decision = Decision(item, "boss", "the-loop budget +1k", "201", "github", 201)
        assert raise_reply(api.state.services, db, decision).status is Status.RECORDED
    assert api.item(item).state == WorkItemStatus.RUNNING  # the stop goes ahead
    bodies = [c["body"] for c in api.fake.issue_comments(api.repo, 1)]
    assert any("relaunched where it left off once it is" in b for b in bodies)

    spawner = api.spawner(api.token())
    assert spawner.register().status_code == 200
    job = spawner.job()
    assert job is not None and job["kind"] == "stop" and job["payload"]["reason"] == "budget"
    assert spawner.result(job["id"], stopped=True, found=True).status_code == 200
    after = api.item(item)
    assert after.state == WorkItemStatus.EXITED and not after.budget["spent"]
    notices = [p["body"] for k, p in jobs(api, item) if k == JobKind.DELIVER]
    assert len(notices) == 1 and notices[0].startswith("the-loop: budget raised by @boss (+1k")


def test_a_new_execute_starts_a_new_run_from_what_the_item_used_so_far(api) -> None:
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, item, input_tokens=1200, requests=1)  # spent: stopped
    with api.session() as db, db.begin():
        row = db.get(WorkItem, item)
        assert row is not None
        restart_run(db, row, datetime.now(UTC))  # what an execute after a closed PR does
        row.state = WorkItemStatus.RUNNING
    report(api, item, input_tokens=850, requests=1)  # 850 of the new run's 1000: under 90 %
    assert [k for k, _ in jobs(api, item)] == [JobKind.STOP]  # only the first run's stop
    after = api.item(item).budget
    assert after["run"] == 2 and after["stops"] == 1 and after["base"]["input_tokens"] == 1200
