"""The status page in real headless Chromium (Debian's, driven by Playwright) against the App
as deployed (`the-loop serve`) on 127.0.0.1, with work items in every state: nothing loads
without the operator credential, a stalled or dead session never reads as running, and the
Retry button puts a parked delivery back in the inbox. Screenshots are kept as artifacts."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.tables import (
    Delivery,
    Event,
    InboxState,
    Installation,
    Job,
    Repository,
    Spawner,
    WorkItem,
    WorkItemStatus,
)
from tests.browser_support import CHROMIUM, LAUNCH_ARGS
from tests.browser_support import browser_or_skip as _browser_or_skip
from tests.support import RunningApp, fixture_bytes, served_app, wait_for

ADMIN_TOKEN = "operator-token-for-the-status-page-test"
REPO = "octo/loop"
PARKED_DELIVERY = "parked-ping-1"
PULL = {"number": 12, "html_url": f"https://github.com/{REPO}/pull/12"}


def work_item_id_of(n: int) -> str:
    return f"github:{REPO}#{n}"


def seed(engine: Any) -> dict[str, int]:
    """One work item per status, a fresh and a silent spawner, a pending job, a parked
    delivery and the events the spawner reported. Returns issue number by status."""
    now = datetime.now(UTC)
    numbers = {status.value: n for n, status in enumerate(WorkItemStatus, start=1)}
    numbers["running-silent"] = len(numbers) + 1
    frozen = {
        "decisions": {"phase-selection": {"at": now.isoformat(), "by": "octocat"}},
        "harness": "claude",
        "model": "opus",
        "effort": "",
    }
    with Session(engine) as session, session.begin():
        session.add(Installation(id=7, account_login="octo", account_type="Organization"))
        session.flush()
        session.add(Repository(id=70, installation_id=7, full_name=REPO))
        session.add(
            Spawner(
                id=1,
                name="devbox",
                token_hash="a" * 64,
                repositories=[REPO],
                serves=[REPO],
                harnesses=["claude"],
                version="0.1.0",
                last_seen=now,
            )
        )
        session.add(
            Spawner(
                id=2,
                name="gone-box",
                token_hash="b" * 64,
                repositories=["*"],
                serves=["*"],
                harnesses=["claude"],
                last_seen=now - timedelta(hours=3),
            )
        )
        for key, n in numbers.items():
            status = "running" if key == "running-silent" else key
            live = status not in ("parked", "unlabeled", "closed")
            spawner = (2, "gone-box") if key == "running-silent" else (1, "devbox")
            session.add(
                WorkItem(
                    id=work_item_id_of(n),
                    repo_full_name=REPO,
                    issue_number=n,
                    installation_id=7,
                    title=f"<b>Issue</b> in state {key}",
                    html_url=f"https://github.com/{REPO}/issues/{n}",
                    state=status,
                    frozen=frozen if live else None,
                    session={"spawner_id": spawner[0], "spawner": spawner[1]} if live else None,
                    phase="design" if status == "running" else None,
                    pull_request=PULL if key == "running" else None,
                    updated_at=now - timedelta(minutes=n),
                )
            )
        stalled = work_item_id_of(numbers["stalled"])
        session.add(
            Event(
                event="session.stalled",
                work_item_id=stalled,
                data={"screen": "permission-prompt", "hint": "answer it in tmux"},
            )
        )
        session.add(Event(event="gate.frozen", work_item_id=stalled, data={"by": "octocat"}))
        session.add(
            Job(
                key="spawn:x",
                kind="spawn",
                work_item_id=work_item_id_of(numbers["frozen"]),
                repo_full_name=REPO,
                payload={},
            )
        )
        session.add(
            Delivery(
                delivery_id=PARKED_DELIVERY,
                event="ping",
                action=None,
                body=fixture_bytes("github/ping.json"),
                state=InboxState.PARKED,
                attempts=8,
                last_error="RuntimeError: it kept failing",
            )
        )
    return numbers


@pytest.fixture
def app(settings_env: dict[str, str]) -> Iterator[RunningApp]:
    env = {
        **settings_env,
        "THE_LOOP_ADMIN_TOKEN": ADMIN_TOKEN,
        "THE_LOOP_SPAWNER_DEAD_SECONDS": "5",
    }
    with served_app(env) as running:
        yield running


@pytest.fixture
def shots() -> Iterator[Path]:
    """Where the screenshots go; kept after the run (the path is printed)."""
    path = Path(tempfile.mkdtemp(prefix="the-loop-status-page-"))
    print(f"\nstatus page screenshots: {path}")
    yield path
    if not any(path.iterdir()):
        shutil.rmtree(path)


def delivery_row(app: RunningApp) -> Delivery:
    with app.state.sessions() as session:
        row = session.scalars(select(Delivery).where(Delivery.delivery_id == PARKED_DELIVERY)).one()
        session.expunge(row)
        return row


def item_state(app: RunningApp, work_item_id: str) -> str | None:
    with app.state.sessions() as session:
        item = session.get(WorkItem, work_item_id)
        return item.state if item is not None else None


@contextmanager
def beating(engine: Any, spawner_id: int) -> Iterator[None]:
    """Spawner `spawner_id` heard every half second, as its heartbeats would be."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(0.5):
            with Session(engine) as session, session.begin():
                row = session.get(Spawner, spawner_id)
                if row is not None:
                    row.last_seen = datetime.now(UTC)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_the_status_page_in_chromium(app, shots, database_url):
    sync_playwright = _browser_or_skip()
    numbers = seed(app.state.engine)
    with beating(app.state.engine, 1):  # devbox lives; gone-box is silent
        silent = work_item_id_of(numbers["running-silent"])
        wait_for(lambda: item_state(app, silent) == WorkItemStatus.LOST, timeout=60)
        _page(app, shots, numbers, sync_playwright)


def _page(app: RunningApp, shots: Path, numbers: dict[str, int], sync_playwright: Any) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            context = browser.new_context()
            page = context.new_page()
            _no_credential_no_page(app, page, shots, numbers)
            _sign_in_drops_the_token(app, page, context)
            _health_is_the_work_items(page, numbers, shots)
            _retry_requeues(app, page, context, shots)
            _event_filters(page, numbers)
        finally:
            browser.close()


def _no_credential_no_page(
    app: RunningApp, page: Any, shots: Path, numbers: dict[str, int]
) -> None:
    for path in ("/", "/status", "/?token=wrong-token-of-some-length"):
        response = page.goto(app.url + path)
        assert response.status == 401, path
        assert "Issue" not in page.content()
    page.screenshot(path=str(shots / "01-no-credential.png"))
    forwarded = httpx.get(f"{app.url}/status", headers={"X-Forwarded-For": "127.0.0.1"})
    assert forwarded.status_code == 401
    retry = httpx.post(f"{app.url}/deliveries/retry", data={"delivery": PARKED_DELIVERY})
    assert retry.status_code == 401 and delivery_row(app).state == InboxState.PARKED
    bearer = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    body = httpx.get(f"{app.url}/status", headers=bearer).json()
    assert body["work_items"]["stalled"] == 1
    shown = {r["work_item_id"]: r for r in body["recent"]}
    running = shown[work_item_id_of(numbers["running"])]
    assert running["url"] == f"https://github.com/{REPO}/issues/{numbers['running']}"
    assert running["pull_request"] == {"number": 12, "url": PULL["html_url"]}
    assert shown[work_item_id_of(numbers["parked"])]["pull_request"] is None


def _sign_in_drops_the_token(app: RunningApp, page: Any, context: Any) -> None:
    response = page.goto(f"{app.url}/?token={ADMIN_TOKEN}&event=gate.")
    assert response.status == 200
    assert page.url == f"{app.url}/?event=gate."  # the token left the address bar
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert ADMIN_TOKEN not in cookie["value"]


def _health_is_the_work_items(page: Any, numbers: dict[str, int], shots: Path) -> None:
    page.goto(page.url.split("?")[0])
    page.screenshot(path=str(shots / "02-status-page.png"), full_page=True)
    assert page.locator("#first-run").count() == 0  # an App is configured: no first-run steps

    def row(key: str) -> Any:
        return page.locator(f'tr.work-item[data-item="{work_item_id_of(numbers[key])}"]')

    stalled = row("stalled")
    assert stalled.locator(".health").inner_text() == "stalled"
    assert "permission-prompt" in stalled.locator(".health-note").inner_text()
    assert row("exited").locator(".health").inner_text() == "exited"
    assert row("running").locator(".health").inner_text() == "running"
    silent = row("running-silent")
    assert silent.locator(".health").inner_text() == "lost"  # the App counted gone-box dead
    assert "gone-box last seen 3h ago" in silent.locator(".health-note").inner_text()
    assert "execute again" in silent.locator(".health-note").inner_text()
    for key in numbers:
        assert row(key).count() == 1, key
    running = row("running")
    issue_link = running.locator("td.issue a")
    assert (
        issue_link.get_attribute("href") == f"https://github.com/{REPO}/issues/{numbers['running']}"
    )
    pull_link = running.locator("td.pull a")
    assert pull_link.inner_text() == "#12" and pull_link.get_attribute("href") == PULL["html_url"]
    assert row("parked").locator("td.pull a").count() == 0
    cells = row("running").locator("td").all_inner_texts()
    assert cells[2:6] == ["design", "claude", "opus", "default\nfrozen by @octocat"]
    assert row("parked").locator("td").all_inner_texts()[2:6] == ["—"] * 4
    assert page.locator("tr.work-item b").count() == 0  # titles are text, never markup
    assert page.locator('tr.spawner[data-spawner="gone-box"]').count() == 1
    assert page.locator("tr.job").count() == 1


def _retry_requeues(app: RunningApp, page: Any, context: Any, shots: Path) -> None:
    forged = context.request.post(
        f"{app.url}/deliveries/retry", form={"delivery": PARKED_DELIVERY, "csrf": "forged"}
    )
    assert forged.status == 403 and delivery_row(app).state == InboxState.PARKED
    parked = page.locator(f'tr.parked[data-delivery="{PARKED_DELIVERY}"]')
    parked.get_by_role("button", name="Retry").click()
    page.wait_for_url("**/?requeued=*")
    assert PARKED_DELIVERY in page.locator("#flash").inner_text()
    page.screenshot(path=str(shots / "03-after-retry.png"), full_page=True)
    row = wait_for(lambda: (r := delivery_row(app)).state == InboxState.DONE and r, timeout=30)
    assert row.attempts == 1  # requeued with a fresh count, then handled once
    assert page.locator(f'tr.parked[data-delivery="{PARKED_DELIVERY}"]').count() == 0


def _event_filters(page: Any, numbers: dict[str, int]) -> None:
    page.fill('input[name="event"]', "session.")
    page.click('button:has-text("Filter")')
    page.wait_for_url("**event=session.*")
    names = page.locator("tr.event").evaluate_all("rows => rows.map(r => r.dataset.event)")
    assert sorted(names) == ["session.lost", "session.stalled"]  # the App's word on gone-box
    page.fill('input[name="event"]', "")
    page.fill('input[name="work_item_id"]', work_item_id_of(numbers["stalled"]))
    page.click('button:has-text("Filter")')
    page.wait_for_url("**work_item_id=*")
    names = page.locator("tr.event").evaluate_all("rows => rows.map(r => r.dataset.event)")
    assert sorted(names) == ["gate.frozen", "session.stalled"]


def test_a_live_session_is_listed_first_however_many_items_came_after_it(app):
    """130 parked items updated after one running session: the page and `/status` still list
    the running one (first), say how many they left out, and filter by state."""
    now = datetime.now(UTC)
    with app.state.sessions() as session, session.begin():
        session.add(Installation(id=7, account_login="octo", account_type="Organization"))
        for n in range(1, 132):
            running = n == 1
            session.add(
                WorkItem(
                    id=work_item_id_of(n),
                    repo_full_name=REPO,
                    issue_number=n,
                    installation_id=7,
                    title=f"Issue {n}",
                    html_url=f"https://github.com/{REPO}/issues/{n}",
                    state="running" if running else "parked",
                    session={"spawner_id": 1, "spawner": "devbox"} if running else None,
                    updated_at=now - timedelta(hours=5) if running else now - timedelta(seconds=n),
                )
            )
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    page = httpx.get(f"{app.url}/", headers=auth, timeout=30).text
    rows = page.split('class="work-item" data-item="')[1:]
    assert rows[0].startswith(work_item_id_of(1))  # the live one, although the oldest
    assert len(rows) == 101  # it, then the latest 100 of the others
    assert "30 more items not shown." in page
    only = httpx.get(f"{app.url}/?state=running", headers=auth, timeout=30).text
    assert only.count('class="work-item" data-item="') == 1 and "not shown" not in only
    parked = httpx.get(f"{app.url}/?state=parked", headers=auth, timeout=30).text
    assert "30 more items parked not shown." in parked
    body = httpx.get(f"{app.url}/status", headers=auth, timeout=30).json()
    assert body["recent"][0]["work_item_id"] == work_item_id_of(1)
    assert body["recent_not_listed"] == 131 - 51
