"""A spawner that dies, end to end: the App (real webhooks, inbox worker, spawner API, its
sweep) and `the-loop spawner` as its own process (real tmux), killed with SIGKILL.

Within the dead window its running item turns `lost`: `/status`, `/metrics` and the one
progress comment say so (one edit), and the App logs a warning. The spawner started after it
on the same devbox ends the session its predecessor left in tmux and reports it ended.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.fleet.tokens import create_token
from app.spawner.naming import item_slug
from app.spawner.session.tmux import TmuxRunner
from app.spawner.session.watchdog import LEFT_BEHIND
from app.store.tables import WorkItemStatus
from tests.devbox_support import STANDIN_MODEL_KEY, release
from tests.gate_support import ITEM, REPO, item_row, progress_of
from tests.spawner_support import StandIn, bare_repository
from tests.support import OPERATOR_TOKEN, wait_for

SCRAPE = "a-scrape-token-for-the-death-0123"
pytestmark = [
    pytest.mark.admin_token,
    pytest.mark.app_env(THE_LOOP_SPAWNER_DEAD_SECONDS="3", THE_LOOP_METRICS_TOKEN=SCRAPE),
    pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True),
]
ROOT = Path(__file__).resolve().parents[2]


def operator_yaml(standin: StandIn, tmp_path: Path) -> str:
    return f"""
harnesses:
  - {{name: claude, default: true, command: {standin.path}}}
routing:
  workspace: {{root: {tmp_path / "work"}}}
  sandbox: {standin.sandbox!r}
"""


OPERATOR_YAML = operator_yaml


@contextmanager
def spawner(env: dict[str, str], log: Path, socket: str) -> Iterator[subprocess.Popen[bytes]]:
    """`the-loop spawner` as the operator runs it; killed (if still running) on leaving."""
    args = ["--name", "devbox", "--tmux-socket", socket, "--wait", "2", "--watchdog-interval", "1"]
    with log.open("a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "spawner", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def work_item_counts(app: Any) -> dict[str, int]:
    bearer = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    return dict(httpx.get(f"{app.url}/status", headers=bearer).json()["work_items"])


def lost_metric(app: Any) -> float:
    resp = httpx.get(f"{app.url}/metrics", headers={"Authorization": f"Bearer {SCRAPE}"})
    return sum(
        s.value
        for family in text_string_to_metric_families(resp.text)
        for s in family.samples
        if s.name == "the_loop_work_items" and s.labels.get("status") == "lost"
    )


def progress_edits_saying(fake: Any, words: str) -> int:
    """How many edits of a comment on the issue said `words`."""
    edits = fake.calls("PATCH", r"/issues/comments/\d+$")
    return sum(1 for r in edits if words in str((r.json or {}).get("body", "")))


def test_a_killed_spawner_s_session_is_lost_and_its_successor_ends_what_it_left(
    running_app: Any,
    fake_github: Any,
    standin: StandIn,
    tmp_path: Path,
    home: Path,
    operator_yaml: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, _ = fake_github
    with running_app.state.sessions() as db, db.begin():
        token = create_token(db, "devbox", [REPO])
    config = tmp_path / "devbox-config.yaml"
    config.write_text(operator_yaml)
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "THE_LOOP_URL": running_app.url,
        "THE_LOOP_SPAWNER_TOKEN": token,
        "THE_LOOP_CONFIG": str(config),
        "THE_LOOP_STATE_DIR": str(tmp_path / "devbox-state"),
        "THE_LOOP_SPAWNER_HEARTBEAT_SECONDS": "0.5",
        "ANTHROPIC_API_KEY": STANDIN_MODEL_KEY,
    }
    socket = f"the-loop-death-{uuid.uuid4().hex[:8]}"
    tmux = TmuxRunner(socket)
    log = tmp_path / "spawner.log"
    caplog.set_level(logging.WARNING, logger="app.fleet.liveness")
    try:
        with spawner(env, log, socket) as first:
            release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
            standin.wait_start(ITEM, timeout=60)
            wait_for(lambda: item_row(running_app).state == WorkItemStatus.RUNNING, timeout=60)
            wait_for(lambda: "running" in progress_of(fake), timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait()
        assert tmux.exists(item_slug(ITEM))  # the session outlived its spawner

        wait_for(lambda: item_row(running_app).state == WorkItemStatus.LOST, timeout=60)
        assert work_item_counts(running_app).get("lost") == 1
        assert work_item_counts(running_app).get("running", 0) == 0
        assert lost_metric(running_app) == 1
        wait_for(lambda: "lost: its spawner went silent" in progress_of(fake), timeout=60)
        assert progress_edits_saying(fake, "lost: its spawner went silent") == 1
        assert running_app.events("session.lost")[0]["work_item_id"] == ITEM
        warned = [r.getMessage() for r in caplog.records if "marked dead" in r.getMessage()]
        assert len(warned) == 1 and "devbox" in warned[0] and ITEM in warned[0]

        with spawner(env, log, socket):  # the next spawner on this devbox
            wait_for(lambda: not tmux.exists(item_slug(ITEM)), timeout=60)
            wait_for(lambda: item_row(running_app).state == WorkItemStatus.EXITED, timeout=60)
            exits = [e for e in running_app.events("session.exited") if e["work_item_id"] == ITEM]
            assert exits and exits[-1]["reason"] == LEFT_BEHIND
        assert f"ended tmux session {item_slug(ITEM)} of {ITEM}" in log.read_text()
    finally:
        tmux.kill_server()
