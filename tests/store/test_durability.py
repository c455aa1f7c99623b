"""A crash between the ack and the handling loses nothing: real processes, real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.github.services import utcnow
from app.store.engines import make_engine, migrate
from app.store.tables import Delivery, Event, InboxState, Installation
from channels import outbox
from tests.slack_support import ISSUE_URL, MIRROR_CHANNEL, mirror_item, started_payload
from tests.support import fixture_bytes, free_port, healthy, post_webhook, wait_for

ROOT = Path(__file__).resolve().parents[2]


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_sigkill_after_ack_then_restart_runs_the_handler_exactly_once(settings_env):
    port = free_port()
    env = {**os.environ, **settings_env, "PORT": str(port), "THE_LOOP_INBOX_WORKERS": "0"}
    server = start(["serve", "--workers", "1"], env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url), timeout=30)
        resp = post_webhook(
            url,
            "installation",
            fixture_bytes("github/installation.created.json"),
            delivery="crash-1",
        )
        assert resp.status_code == 202
    finally:
        kill_group(server)  # the whole server dies before any worker handled the delivery

    engine = make_engine(settings_env["DATABASE_URL"])
    with Session(engine) as session:
        row = session.scalars(select(Delivery).where(Delivery.delivery_id == "crash-1")).one()
        assert row.state == InboxState.QUEUED
        assert session.get(Installation, 957387) is None

    worker_env = {**env, "THE_LOOP_INBOX_WORKERS": "1"}
    for _ in range(2):  # a second restart must not run it again
        worker = start(["worker"], worker_env)
        try:
            wait_for(lambda: _state(engine, "crash-1") == InboxState.DONE, timeout=30)
            # handling runs below the priority of the App that acknowledges
            lower = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
            wait_for(lambda p=worker.pid, n=lower: os.getpriority(os.PRIO_PROCESS, p) == n)
        finally:
            kill_group(worker)
    with Session(engine) as session:
        assert session.get(Installation, 957387) is not None
        recorded = session.scalars(
            select(Event).where(Event.event == "installation.recorded")
        ).all()
        assert len(recorded) == 1
    engine.dispose()


def _state(engine, delivery_id: str) -> str:
    with Session(engine) as session:
        return session.scalars(
            select(Delivery.state).where(Delivery.delivery_id == delivery_id)
        ).one()


def test_the_worker_command_also_sends_queued_slack_messages(settings_env, fake_slack):
    """`the-loop worker` on its own (no HTTP server) delivers what the mirror queued."""
    fake, slack_url = fake_slack
    Path(settings_env["THE_LOOP_CONFIG"]).write_text(f"slack: {{channel: {MIRROR_CHANNEL}}}\n")
    env = {**os.environ, **settings_env, "SLACK_BOT_TOKEN": fake.token, "SLACK_API_URL": slack_url}
    engine = make_engine(settings_env["DATABASE_URL"])
    migrate(engine)
    item = mirror_item(engine, 5)
    with Session(engine) as session, session.begin():
        outbox.enqueue(
            session, item, "item_started", {"url": ISSUE_URL, **started_payload(5)}, utcnow()
        )
    worker = start(["worker"], env)
    try:
        wait_for(lambda: fake.messages, timeout=30)
    finally:
        kill_group(worker)
        engine.dispose()
    assert "Issue 5" in str(fake.messages[0])
