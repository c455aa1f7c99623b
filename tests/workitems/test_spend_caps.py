"""Spend caps across work items (`routing.budget.daily` / `monthly`) over the real spawner API,
store and fake GitHub: usage reported by a spawner fills the day's ledger; at 90 % of a cap
a running session gets the wrap-up notice, at 100 % its budget stop; a new execute then waits
in line saying why and is offered to no spawner, until an authorized `the-loop budget` on
the issue lifts the caps for the day and the stopped session is relaunched."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app.store.tables import Job, JobKind, JobState, SpendDay, WorkItem, WorkItemStatus
from app.workitems.decide.decisions import Decision, Status
from app.workitems.flow.capacity import held_words
from app.workitems.flow.jobs import enqueue, spawn_job
from app.workitems.spend.spend_windows import Window, day_key, first_day
from app.workitems.spend.spending import raise_reply
from app.workitems.tell.progress import view_of
from app.workitems.tell.progress_text import render_progress
from tests.spawnerapi_support import Api, comment_delivery, send, serve_api
from tests.support import OPERATOR_TOKEN

SHARED_API = {"config_yaml": "routing: {budget: {daily: {tokens: 1000}}}\n"}
DAILY_WAIT = "daily budget reached (resets 00:00 UTC)"


def report(api: Api, item: str, **counts: int) -> None:
    event = {"event": "session.usage", "work_item_id": item, "id": uuid.uuid4().hex, **counts}
    answer = api.spawner(api.token()).events(event)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text


def jobs(api: Api, item: str) -> list[tuple[str, dict[str, Any]]]:
    with api.session() as db:
        rows = db.scalars(select(Job).where(Job.work_item_id == item).order_by(Job.id))
        return [(row.kind, dict(row.payload)) for row in rows]


def execute(api: Api, item: str) -> int:
    """What an execute queues: the item's spawn job, joining the line."""
    with api.session() as db, db.begin():
        row = db.get(WorkItem, item)
        assert row is not None
        job = enqueue(
            api.state.services, db, f"spawn:{item}", spawn_job(row, title="t", prompt="p")
        )
        assert job is not None
        return job.id


def poll(api: Api, token: str) -> Any:
    return api.spawner(token).client.get("/jobs", params={"wait": 0})


def drain(api: Api, token: str) -> list[dict[str, Any]]:
    """Every job a spawner is offered now, each reported done."""
    offered: list[dict[str, Any]] = []
    while (answer := poll(api, token)).status_code == 200:
        job = answer.json()["job"]
        offered.append(job)
        assert api.spawner(token).result(job["id"], ok=True).status_code == 200
    assert answer.status_code == 204, answer.text
    return offered


def session_line(api: Api, item: str) -> str:
    view = view_of(api.item(item), api.state.services.config)
    return next(line for line in render_progress(view).splitlines() if "**Session:**" in line)


def test_a_daily_cap_reached_stops_the_session_and_queues_the_next_execute(api: Api) -> None:
    token = api.token()
    api.spawner(token).register()
    running = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, running, input_tokens=850, requests=1)
    assert jobs(api, running) == []
    report(api, running, input_tokens=60, output_tokens=10, requests=1)  # 920 of 1000
    ((kind, notice),) = jobs(api, running)
    assert kind == JobKind.DELIVER and notice["source"] == "notice"
    assert notice["body"].startswith("the-loop: budget — 90% or more of the daily budget")
    assert "tokens 920 of 1k" in notice["body"] and "Wrap up now" in notice["body"]

    report(api, running, output_tokens=80, requests=1)  # 1000 of 1000
    report(api, running, output_tokens=5, requests=1)  # past it: no second stop
    kinds = [(k, p.get("reason")) for k, p in jobs(api, running)]
    assert kinds == [(JobKind.DELIVER, None), (JobKind.STOP, "budget")]
    assert "daily budget reached" in jobs(api, running)[1][1]["note"]
    (reached,) = api.events("budget.cap_reached", running)
    assert reached["cap"] == "daily budget"

    waiting = api.work_item(2)
    spawn = execute(api, waiting)
    assert held_words(api.item(waiting).session) == DAILY_WAIT
    assert f"**Session:** waiting: {DAILY_WAIT}" in session_line(api, waiting)
    offered = drain(api, token)  # the running session's notice and stop go out, no spawn
    assert [(job["kind"], job["work_item_id"]) for job in offered] == [
        (JobKind.DELIVER, running),
        (JobKind.STOP, running),
    ]
    assert api.job(spawn).state == JobState.QUEUED

    with api.session() as db, db.begin():  # the spawner stopped the session (its job's result)
        row = db.get(WorkItem, running)
        assert row is not None
        row.state = WorkItemStatus.STOPPED
    assert "**stopped: spend cap**" in session_line(api, running)

    send(api, comment_delivery(api.repo, 2, "the-loop budget", login="stranger"))
    assert held_words(api.item(waiting).session) == DAILY_WAIT  # not theirs to lift
    assert [e["reason"] for e in api.events("gate.refused", waiting)] == ["unauthorized"]

    api.fake.grant(api.repo, "boss", "maintain")
    send(api, comment_delivery(api.repo, 1, "the-loop budget", login="boss"))
    assert held_words(api.item(waiting).session) == ""
    after = api.item(running)
    assert after.state == WorkItemStatus.EXITED  # relaunched by the follow-up below
    relaunch = [p for k, p in jobs(api, running) if k == JobKind.DELIVER][-1]
    assert relaunch["body"].startswith("the-loop: budget — @boss lifted the spend caps")
    bodies = [c["body"] for c in api.fake.issue_comments(api.repo, 1)]
    assert any("@boss lifted the daily and monthly spend caps" in b for b in bodies)
    (lifted,) = api.events("budget.lifted", running)
    assert lifted["by"] == "boss"
    launched = [(job["kind"], job["work_item_id"]) for job in drain(api, token)]
    assert sorted(launched) == [(JobKind.DELIVER, running), (JobKind.SPAWN, waiting)]
    assert api.job(spawn).state == JobState.DONE
    with api.session() as db:
        day = db.scalars(select(SpendDay).where(SpendDay.repo_full_name == api.repo.lower()))
        ((tokens, by),) = [(row.tokens, row.lifted_by) for row in day]
    assert (tokens, by) == (1005, "boss")


@pytest.fixture(scope="module")
def repo_api(tmp_path_factory: pytest.TempPathFactory, app_private_key: str) -> Any:
    directory = tmp_path_factory.mktemp("spend-caps-repository")
    config = (
        "models:\n  - {name: pricey, id: pricey-1, price: {input: 1000, output: 1000}}\n"
        "routing:\n  budget:\n    daily: {repository: {tokens: 1000}}\n"
        "    monthly: {repository: {usd: 2}}\n"
    )
    admin = {"THE_LOOP_ADMIN_TOKEN": OPERATOR_TOKEN}
    yield from serve_api("sqlite", directory, app_private_key, config_yaml=config, extra_env=admin)


def test_a_repository_cap_holds_only_its_own_repository(repo_api: Api) -> None:
    spent, other = repo_api.fresh(), repo_api.fresh()
    token = spent.token(repositories=[spent.repo, other.repo])
    spent.spawner(token).register()
    report(spent, spent.work_item(1, status=WorkItemStatus.RUNNING), input_tokens=1000)
    held = spent.work_item(2)
    execute(spent, held)
    free = execute(other, other.work_item(2))
    assert held_words(spent.item(held).session) == "daily budget of this repository reached " + (
        "(resets 00:00 UTC)"
    )
    offered = [(job["kind"], job["id"]) for job in drain(spent, token)]
    assert (JobKind.SPAWN, free) in offered
    assert [kind for kind, _ in offered].count(JobKind.SPAWN) == 1  # its own waits


def test_a_monthly_cap_counts_every_day_of_the_month_at_the_model_price(repo_api: Api) -> None:
    api = repo_api.fresh()
    month_start = first_day(Window.MONTHLY, api.state.services.clock())
    with api.session() as db, db.begin():  # earlier this month: $1.99 spent
        db.add(
            SpendDay(
                installation_id=1,
                repo_full_name=api.repo.lower(),
                day=month_start,
                tokens=0,
                usd_micros=1_990_000,
            )
        )
    running = api.work_item(1, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        row = db.get(WorkItem, running)
        assert row is not None
        row.frozen = {**row.frozen, "model": "pricey"}
    report(api, running, input_tokens=20)  # $0.02 more: $2.01 of $2.00
    assert [(k, p.get("reason")) for k, p in jobs(api, running)] == [(JobKind.STOP, "budget")]
    waiting = api.work_item(2)
    execute(api, waiting)
    words = held_words(api.item(waiting).session)
    assert words.startswith("monthly budget of this repository reached (resets 1 ")
    assert words.endswith(" 00:00 UTC)")


def test_metrics_and_the_status_page_show_spend_against_each_cap(repo_api: Api) -> None:
    api = repo_api.fresh()
    running = api.work_item(1, status=WorkItemStatus.RUNNING)
    report(api, running, input_tokens=400, output_tokens=20)
    auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    scraped = httpx.get(f"{api.url}/metrics", headers=auth)
    assert scraped.status_code == 200, scraped.text
    samples = {
        (s.name, s.labels.get("window"), s.labels.get("kind")): s.value
        for family in text_string_to_metric_families(scraped.text)
        for s in family.samples
        if s.labels.get("repository") == api.repo.lower()
    }
    assert samples[("the_loop_spend_cap_limit", "daily", "tokens")] == 1000
    assert samples[("the_loop_spend_cap_spent", "daily", "tokens")] == 420
    assert samples[("the_loop_spend_cap_limit", "monthly", "usd")] == 2
    assert ("the_loop_spend_cap_limit", "daily", "usd") not in samples  # no such cap

    page = httpx.get(f"{api.url}/", headers=auth)
    assert page.status_code == 200
    row = page.text.split(f'data-repository="{api.repo.lower()}" data-kind="tokens"', 1)[1]
    row = row.split("</tr>", 1)[0]
    assert "420 tokens" in row and "1,000 tokens" in row
    status = httpx.get(f"{api.url}/status", headers=auth).json()
    mine = [c for c in status["spend_caps"] if c["repository"] == api.repo.lower()]
    assert {(c["window"], c["kind"], c["limit"], c["spent"]) for c in mine} == {
        ("daily", "tokens", 1000, 420),
        ("monthly", "usd", 2, 0),
    }


def test_what_yesterday_spent_holds_nothing_today(repo_api: Api) -> None:
    api = repo_api.fresh()
    token = api.token()
    api.spawner(token).register()
    yesterday = day_key(api.state.services.clock() - timedelta(days=1))
    with api.session() as db, db.begin():
        db.add(
            SpendDay(
                installation_id=1,
                repo_full_name=api.repo.lower(),
                day=yesterday,
                tokens=50_000,
                usd_micros=0,
            )
        )
    item = api.work_item(1)
    spawn = execute(api, item)
    assert held_words(api.item(item).session) == ""
    assert [job["id"] for job in drain(api, token)] == [spawn]


def test_the_keyword_alone_lifts_nothing_while_no_cap_holds_the_item(repo_api: Api) -> None:
    api = repo_api.fresh()
    item = api.work_item(1, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "boss", "maintain")
    with api.session() as db, db.begin():
        decision = Decision(item, "boss", "the-loop budget", "201", "github", 201)
        outcome = raise_reply(api.state.services, db, decision)
    assert outcome.status is Status.REFUSED and "no daily or monthly budget" in (outcome.why or "")
    assert [e["reason"] for e in api.events("gate.refused", item)] == ["no-cap"]
    with api.session() as db:
        assert db.get(SpendDay, (1, api.repo.lower(), day_key(api.state.services.clock()))) is None
