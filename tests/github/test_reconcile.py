"""Reading GitHub's delivery log: what the App missed while down is handled once, a delivery
both POSTed and logged once, pull mode needs no POST at all, and a rate-limited log is
waited out without losing anything. The App is real (served on loopback, its inbox worker
running), GitHub is the fake with its delivery log (`tests/fakes/github_hooklog.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.tables import Delivery
from tests.fakes.github_api import FakeGitHub
from tests.fault_support import REPO, labeled_body
from tests.support import RunningApp, post_webhook, served_app, wait_for, wsgi_app

ROOT = Path(__file__).resolve().parents[2]
LOG_ENTRY = r"^/app/hook/deliveries/\d+$"
LOG_LIST = r"^/app/hook/deliveries$"
ADMIN = "operator-token-for-the-reconcile-test"


def labeled(number: int) -> dict[str, Any]:
    """`issues.labeled` with the trigger label on issue `number`: its handler posts a
    checklist comment there."""
    payload: dict[str, Any] = json.loads(labeled_body(number))
    return payload


def checklists(fake: FakeGitHub, numbers: range) -> dict[int, int]:
    return {n: len(fake.issue_comments(REPO, n)) for n in numbers}


def handled_once(app: RunningApp, fake: FakeGitHub, numbers: range) -> bool:
    """Every issue has its one checklist, and no delivery was handled a second time."""
    once = all(count == 1 for count in checklists(fake, numbers).values())
    return once and not app.events("workitem.label_ignored")


def origins(app: RunningApp) -> Counter[str]:
    with app.state.sessions() as session:
        return Counter(session.scalars(select(Delivery.origin)))


def passes(app: RunningApp) -> list[dict[str, Any]]:
    return app.events("inbox.reconciled")


def test_what_github_failed_to_deliver_while_the_app_was_down_is_handled_once(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    fake, _ = fake_github
    for n in range(1, 4):  # the App is not running: each POST fails and is logged
        entry = fake.hook_log.deliver("issues", labeled(n), url=None)
        assert entry["status"] == "failed to connect to host"
    env = {**settings_env, "THE_LOOP_RECONCILE_SECONDS": "300", "THE_LOOP_ADMIN_TOKEN": ADMIN}
    with wsgi_app(env) as app:
        wait_for(lambda: handled_once(app, fake, range(1, 4)), timeout=30)
        [first] = passes(app)
        assert first["recovered"] == 3 and first["missing"] == 3 and first["complete"]
        bearer = {"Authorization": f"Bearer {ADMIN}"}
        shown = httpx.get(f"{app.url}/status", headers=bearer).json()["delivery_log"]
        assert (shown["mode"], shown["recovered"], shown["missing"]) == ("reconcile", 3, 3)
        page = httpx.get(f"{app.url}/", headers={**bearer, "Accept": "text/html"}).text
        assert "recovered <strong>3</strong> of 3 missing" in page
        again = app.state.reconciler().run_pass()  # nothing new: nothing fetched
        assert again is not None and again.recovered == 0 and again.missing == 0
        assert origins(app) == Counter({"pulled": 3})
        assert handled_once(app, fake, range(1, 4))
    assert len(fake.calls("GET", LOG_ENTRY)) == 3  # each payload fetched once


def test_a_delivery_both_posted_and_logged_is_handled_once(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    fake, _ = fake_github
    env = {**settings_env, "THE_LOOP_RECONCILE_SECONDS": "300"}
    with wsgi_app(env) as app:
        hook = f"{app.url}/github/webhooks"
        wait_for(lambda: passes(app))  # the pass on start
        pushed = fake.hook_log.deliver("issues", labeled(1), url=hook)
        assert pushed["status_code"] == 202
        missed = fake.hook_log.deliver("issues", labeled(2), url=None)
        counts = app.state.reconciler().run_pass()
        assert counts is not None and counts.listed == 2 and counts.missing == 1
        assert counts.recovered == 1
        # GitHub redelivers the missed one after the App pulled it: a repeat, not a second.
        again = fake.hook_log.redeliver(missed, hook)
        assert again["status_code"] == 202
        wait_for(lambda: handled_once(app, fake, range(1, 3)), timeout=30)
        later = app.state.reconciler().run_pass()
        assert later is not None and later.missing == 0
        assert origins(app) == Counter({"pushed": 1, "pulled": 1})
    assert len(fake.calls("GET", LOG_ENTRY)) == 1
    assert handled_once(app, fake, range(1, 3))


@pytest.mark.parametrize(
    ("path", "status"),
    [(LOG_LIST, 429), (LOG_ENTRY, 429), (LOG_ENTRY, 403)],
    ids=["listing-429", "payload-429", "payload-403-secondary"],
)
def test_a_rate_limited_log_is_waited_out_and_nothing_is_lost(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str], path: str, status: int
) -> None:
    fake, _ = fake_github
    for n in range(1, 4):
        fake.hook_log.deliver("issues", labeled(n), url=None)
    fake.fail_next(path, status, {"Retry-After": "1"})
    # Five minutes between passes: only the wait GitHub asked for brings the next one.
    env = {**settings_env, "THE_LOOP_RECONCILE_SECONDS": "300"}
    with wsgi_app(env) as app:
        wait_for(lambda: handled_once(app, fake, range(1, 4)), timeout=30)
        limited, finished = passes(app)
        assert limited["rate_limited"] and not limited["complete"]
        assert limited["resumes_at"] is not None
        assert finished["complete"] and not finished["rate_limited"]
        assert limited["recovered"] + finished["recovered"] == 3
    assert fake.failures_left() == 0  # the refusal was answered to the App
    # One listing per pass, the refused one included: the App waited, it did not hammer.
    assert len(fake.calls("GET", LOG_LIST)) == 2
    fetched = Counter(r.path for r in fake.calls("GET", LOG_ENTRY))
    refused_fetch = 1 if path == LOG_ENTRY else 0
    assert sum(fetched.values()) == 3 + refused_fetch


def test_pull_mode_turns_a_label_into_a_checklist_with_no_webhook_posted(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    fake, _ = fake_github
    env = {k: v for k, v in settings_env.items() if k != "GITHUB_WEBHOOK_SECRET"}
    env |= {"THE_LOOP_INGRESS": "pull", "THE_LOOP_PULL_SECONDS": "0.2"}
    with served_app(env) as app:  # `the-loop serve`, as deployed; it must stop cleanly
        assert post_webhook(app.url, "issues", labeled(7)).status_code == 401
        fake.hook_log.deliver("issues", labeled(7), url=None)
        wait_for(lambda: handled_once(app, fake, range(7, 8)), timeout=30)
        assert origins(app) == Counter({"pulled": 1})
        [recovered] = [p for p in passes(app) if p["recovered"]]
        assert recovered["mode"] == "pull"
    [comment] = fake.issue_comments(REPO, 7)
    assert comment["user"]["login"].endswith("[bot]")


def test_inbox_reconcile_runs_one_pass_and_says_what_it_recovered(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    fake, _ = fake_github
    for n in range(1, 3):
        fake.hook_log.deliver("issues", labeled(n), url=None)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "inbox", "--reconcile"],
        cwd=ROOT,
        env={**os.environ, **settings_env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "recovered 2 of 2 missing deliveries" in done.stdout, done.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "app.cli", "inbox", "--state", "queued"],
        cwd=ROOT,
        env={**os.environ, **settings_env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    guids = [entry["guid"] for entry in fake.hook_log.entries]
    assert all(guid in listing.stdout for guid in guids), listing.stdout
    assert listing.stdout.count("pulled") == 2


def test_the_log_takes_no_more_than_its_share_of_the_hourly_budget(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    from datetime import UTC, datetime, timedelta

    from app.audit import EventLog
    from app.config.process_settings import load_settings
    from app.github.client import GitHubApp
    from app.github.ingest import IngestWriter
    from app.github.reconcile import Reconciler
    from app.store.engines import make_engine, migrate

    fake, _ = fake_github
    for n in range(1, 7):
        fake.hook_log.deliver("issues", labeled(n), url=None)
    # 0.0008 of GitHub's 5,000 an hour: four requests, a listing and three payloads.
    env = {**settings_env, "THE_LOOP_LOG_BUDGET_SHARE": "0.0008"}
    settings = load_settings(env, dotenv=None)
    engine = make_engine(settings.database_url)
    migrate(engine)
    events = EventLog(settings.events_path, engine)
    ingest = IngestWriter(engine, events)
    now = [datetime.now(UTC) - timedelta(minutes=61)]
    reconciler = Reconciler(settings, engine, GitHubApp(settings), ingest, events, lambda: now[0])
    try:
        first = reconciler.run_pass()
        assert first is not None and first.budget_spent and not first.complete
        assert (first.requests, first.recovered) == (4, 3)
        now[0] += timedelta(seconds=1)
        assert reconciler.run_pass() is None  # the hour's share is spent: no request
        assert len(fake.calls("GET", "^/app/hook/deliveries")) == 4
        now[0] = datetime.now(UTC)  # the next hour, and GitHub's budget with it
        fake.hook_log.used = 0
        second = reconciler.run_pass()
        assert second is not None and second.complete and second.recovered == 3
        assert second.listed == 3  # the cursor moved past what the first pass stored
    finally:
        ingest.close()
        engine.dispose()
    with Session(make_engine(settings.database_url)) as session:
        stored = list(session.scalars(select(Delivery.delivery_id)))
    assert sorted(stored) == sorted(e["guid"] for e in fake.hook_log.entries)


def test_after_a_long_stop_the_log_is_read_back_to_where_the_last_pass_left_it(
    settings_env: dict[str, str], fake_github: tuple[FakeGitHub, str]
) -> None:
    from datetime import UTC, datetime, timedelta

    fake, _ = fake_github
    env = {**settings_env, "THE_LOOP_RECONCILE_SECONDS": "300"}
    with wsgi_app(env) as app:
        fake.hook_log.deliver("issues", labeled(1), url=f"{app.url}/github/webhooks")
        # The App's own pass at start may hold the lease a moment: this one runs after it.
        settled = wait_for(lambda: app.state.reconciler().run_pass(), timeout=30)
        assert settled.complete and settled.missing == 0
    # Stopped for two hours: three deliveries fail meanwhile, the first long before the
    # last hour a first pass would look back on.
    for n, hours_ago in ((2, 2.0), (3, 1.5), (4, 0.1)):
        entry = fake.hook_log.deliver("issues", labeled(n), url=None)
        entry["delivered_at"] = (datetime.now(UTC) - timedelta(hours=hours_ago)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    with wsgi_app(env) as app:
        wait_for(lambda: handled_once(app, fake, range(1, 5)), timeout=30)
        recovered = [p for p in passes(app) if p["recovered"]]
        assert [p["recovered"] for p in recovered] == [3]
        assert origins(app) == Counter({"pushed": 1, "pulled": 3})
