"""Shared pieces of the Slack tests: the fake Slack Web API fixture, a checklist in the gate's
mirror shape, snapshots, and Slack request signing."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.gate.markers import MarkerKind, find_marker
from app.store.tables import Job, JobKind, WorkItem, WorkItemStatus
from tests.fakes.github_api import FakeGitHub
from tests.fakes.server import LiveServer
from tests.fakes.slack_api import FakeSlack
from tests.support import RunningApp

SNAPSHOTS = Path(__file__).parent / "snapshots" / "slack"
SIGNING_SECRET = "test-slack-signing-secret"
SLACK_CHANNEL = "C08REALCHAN1"  # the channel of the published thread-reply payloads
SLACK_MEMBER = "U08REALUSER1"
SLACK_THREAD = "1775407823.782829"

SLACK_CONFIG = f"""
slack:
  channel: {SLACK_CHANNEL}
  users: {{{SLACK_MEMBER}: octocat, UQEUMSA0K: daan}}
"""
MIRROR_CHANNEL = "C0LOOP0001"  # the mirror's own channel
ISSUE_REPO = "Codertocat/Hello-World"
ISSUE_URL = "https://github.com/Codertocat/Hello-World/issues/1"


@pytest.fixture
def fake_slack() -> Iterator[tuple[FakeSlack, str]]:
    """The fake Slack Web API on loopback, and the base URL a WebClient is given for it."""
    fake = FakeSlack()
    with LiveServer(fake.wsgi()) as server:
        yield fake, server.url + "/api/"


def row(token: str, label: str, checked: bool) -> dict[str, Any]:
    return {"token": token, "label": label, "checked": checked}


def sample_checklist(phases: int = 4) -> dict[str, Any]:
    """A checklist as `Checklist.to_mirror()` shapes it, with every kind of section."""
    phase_rows = [row(f"phase-{i}", f"phase number {i}", True) for i in range(phases)]
    return {
        "sections": [
            {
                "kind": "phases",
                "title": "Phases",
                "single": False,
                "default": None,
                "rows": phase_rows,
            },
            {
                "kind": "opt-in",
                "title": "Opt-in phases",
                "single": False,
                "default": None,
                "rows": [row("brainstorming", "explore the problem first", False)],
            },
            {
                "kind": "harness",
                "title": "Harness",
                "single": True,
                "default": "claude",
                "rows": [
                    row("harness-claude", "claude", True),
                    row("harness-codex", "codex", False),
                ],
            },
            {
                "kind": "model",
                "title": "Model",
                "single": True,
                "default": None,
                "rows": [row("model-opus", "opus", False), row("model-sonnet", "sonnet", False)],
            },
            {
                "kind": "effort",
                "title": "Effort",
                "single": True,
                "default": "medium",
                "rows": [
                    row("effort-low", "low", False),
                    row("effort-medium", "medium", True),
                    row("effort-high", "high", False),
                ],
            },
        ],
        "keyword": "the-loop execute",
        "comment_id": 900000001,
        "url": ISSUE_URL,
    }


def assert_snapshot(name: str, value: Any) -> None:
    """Compare `value` with the stored snapshot; `UPDATE_SNAPSHOTS=1` rewrites it."""
    path = SNAPSHOTS / f"{name}.json"
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    assert path.exists(), f"no snapshot {path.name}: run with UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(), f"{name} differs from its snapshot"


def slack_signed(body: str, secret: str = SIGNING_SECRET, ts: int | None = None) -> dict[str, str]:
    """Headers Slack sends: `v0=` HMAC-SHA256 over `v0:{timestamp}:{body}`."""
    stamp = str(ts if ts is not None else int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=" + digest.hexdigest()}


def interaction_body(payload: dict[str, Any]) -> str:
    """How Slack sends an interaction: form-encoded `payload=<json>`."""
    return f"payload={quote(json.dumps(payload))}"


class FakeClock:
    """A clock the test moves by hand, so backoff is checked without sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def slack_env(settings_env: dict[str, str], api_url: str, config_yaml: str) -> dict[str, str]:
    """The conftest environment with the Slack mirror switched on and an operator config."""
    with open(settings_env["THE_LOOP_CONFIG"], "w") as fh:
        fh.write(config_yaml)
    return {
        **settings_env,
        "SLACK_BOT_TOKEN": "xoxb-test-token",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": api_url,
    }


def post_slack(base_url: str, body: str, *, form: bool, secret: str = SIGNING_SECRET) -> Any:
    """POST a signed Slack request to the App's `/slack/events`."""
    kind = "application/x-www-form-urlencoded" if form else "application/json"
    headers = {"Content-Type": kind, **slack_signed(body, secret)}
    return httpx.post(f"{base_url}/slack/events", content=body, headers=headers, timeout=10)


def deliver_jobs(app: RunningApp) -> list[Job]:
    with app.state.sessions() as session:
        return list(session.scalars(select(Job).where(Job.kind == JobKind.DELIVER)))


def mirror_item(engine: Engine, number: int) -> str:
    work_item_id = f"github:Codertocat/Hello-World#{number}"
    with Session(engine) as session, session.begin():
        session.add(
            WorkItem(
                id=work_item_id,
                repo_full_name="Codertocat/Hello-World",
                issue_number=number,
                state=WorkItemStatus.PARKED,
                html_url=ISSUE_URL.replace("/1", f"/{number}"),
            )
        )
    return work_item_id


def started_payload(number: int) -> dict[str, Any]:
    return {"title": f"Issue {number}", "repo": "Codertocat/Hello-World", "issue_number": number}


def threaded_item(app: RunningApp, state: WorkItemStatus, **fields: Any) -> None:
    """The fixture issue as an executed work item whose Slack thread is `SLACK_THREAD`, in
    `state`, with `fields` (phase, artifacts, budget…) set and `frozen` over its record."""
    frozen = fields.pop("frozen", {})
    decided = {"decisions": {"phase-selection": {"at": "t", "by": "octocat"}}, "skips": {}}
    with app.state.sessions() as session, session.begin():
        session.add(
            WorkItem(
                id=f"github:{ISSUE_REPO}#1",
                repo_full_name=ISSUE_REPO,
                issue_number=1,
                installation_id=1,
                state=state,
                html_url=ISSUE_URL,
                frozen={**decided, "harness": "", "model": "", "effort": "", **frozen},
                slack_ts=SLACK_THREAD,
                **fields,
            )
        )


def relayed_comments(github: FakeGitHub, number: int = 1) -> list[dict[str, Any]]:
    """What was said on issue `number` of ISSUE_REPO besides the App's progress comment, which
    a running item gets of its own accord once the App looks at it."""
    return [
        c
        for c in github.issue_comments(ISSUE_REPO, number)
        if (found := find_marker(c["body"])) is None or found.kind != MarkerKind.PROGRESS
    ]
