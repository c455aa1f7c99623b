"""`the-loop slack socket` and `the-loop slack status`, run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.engines import make_engine, migrate
from app.store.tables import Job, JobKind, SlackOutbox, WorkItem, WorkItemStatus
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_socket import FakeSocketMode
from tests.support import fixture_json, wait_for

pytestmark = pytest.mark.sqlite_only

ROOT = Path(__file__).resolve().parents[2]
REPO = "Codertocat/Hello-World"
CHANNEL = "C08REALCHAN1"
THREAD = "1775407823.782829"


@pytest.fixture
def slack_cli_env(
    settings_env: dict[str, str], fake_slack: tuple[FakeSlack, str], tmp_path: Path
) -> dict[str, str]:
    Path(settings_env["THE_LOOP_CONFIG"]).write_text(
        f"slack: {{channel: {CHANNEL}, users: {{U08REALUSER1: octocat}}}}\n"
    )
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return {
        **keep,
        **settings_env,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": fake_slack[0].token,
        "SLACK_API_URL": fake_slack[1],
    }


def the_loop(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def add_running_item(database_url: str) -> Any:
    engine = make_engine(database_url)
    migrate(engine)
    with Session(engine) as session, session.begin():
        session.add(
            WorkItem(
                id=f"github:{REPO}#1",
                repo_full_name=REPO,
                issue_number=1,
                installation_id=1,
                state=WorkItemStatus.RUNNING,
                frozen={"harness": "", "model": "", "effort": ""},
                html_url=f"https://github.com/{REPO}/issues/1",
                slack_ts=THREAD,
            )
        )
    return engine


def test_socket_mode_refuses_to_start_without_an_app_token(
    slack_cli_env: dict[str, str], tmp_path: Path
) -> None:
    result = the_loop(slack_cli_env, tmp_path, "slack", "socket")
    assert result.returncode == 2
    assert "SLACK_APP_TOKEN" in result.stderr


def test_socket_mode_runs_the_same_listeners_over_a_websocket(
    slack_cli_env: dict[str, str],
    tmp_path: Path,
    database_url: str,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    engine = add_running_item(database_url)
    with FakeSocketMode() as socket_mode:
        slack.socket_url = socket_mode.url
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "slack", "socket"],
            env={**slack_cli_env, "SLACK_APP_TOKEN": slack.app_token},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert socket_mode.connected.wait(30), "the runner never connected"
            envelope = socket_mode.send(
                fixture_json("slack/event_callback.message.thread_reply.json")
            )
            wait_for(lambda: any(a.get("envelope_id") == envelope for a in socket_mode.acks))
            [comment] = wait_for(lambda: github.issue_comments(REPO, 1), timeout=20)
            assert comment["body"].startswith("ping?\n\n_from @octocat in Slack_")

            def deliver_jobs() -> list[Job]:
                with Session(engine) as session:
                    return list(session.scalars(select(Job).where(Job.kind == JobKind.DELIVER)))

            [job] = wait_for(deliver_jobs)
            assert job.payload["source"] == "slack"
        finally:
            process.terminate()
            process.wait(timeout=20)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    engine.dispose()


def test_status_reports_messages_slack_has_not_taken(
    slack_cli_env: dict[str, str], tmp_path: Path, database_url: str
) -> None:
    engine = make_engine(database_url)
    migrate(engine)
    healthy = the_loop(slack_cli_env, tmp_path, "slack", "status", "--json")
    assert healthy.returncode == 0 and json.loads(healthy.stdout)["queued"] == 0
    with Session(engine) as session, session.begin():
        session.add(
            SlackOutbox(
                work_item_id="github:o/r#1",
                kind="item_started",
                payload={},
                attempts=2,
                last_error="token_revoked",
            )
        )
    failing = the_loop(slack_cli_env, tmp_path, "slack", "status", "--json")
    facts = json.loads(failing.stdout)
    assert failing.returncode == 1
    assert (facts["queued"], facts["retrying"], facts["last_error"]) == (1, 1, "token_revoked")
    engine.dispose()


def test_the_manifest_grants_what_the_mirror_calls_and_subscribes_what_it_hears() -> None:
    manifest = yaml.safe_load((ROOT / "channels" / "slack-manifest.yaml").read_text())
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"chat:write", "reactions:write", "channels:history", "groups:history"} <= scopes
    settings = manifest["settings"]
    assert set(settings["event_subscriptions"]["bot_events"]) == {
        "message.channels",
        "message.groups",
    }
    assert settings["interactivity"]["is_enabled"] is True
    for url in (settings["event_subscriptions"], settings["interactivity"]):
        assert url["request_url"].endswith("/slack/events")
