"""`the-loop budget +<amount>` typed in a work item's Slack thread: the same decision as on
GitHub, by the member's mapped login, through the App's real `/slack/events` with the fake
Slack Web API and fake GitHub on loopback — never handed to the session as a follow-up."""

from __future__ import annotations

import copy
import json

import pytest

from app.store.tables import WorkItem, WorkItemStatus
from app.workitems.spend.usage import add_usage
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.gate_support import ITEM, REPO
from tests.slack_support import (
    SLACK_CHANNEL,
    SLACK_MEMBER,
    deliver_jobs,
    post_slack,
    threaded_item,
)
from tests.support import RunningApp, fixture_json, wait_for

CONFIG = f"""
slack:
  channel: {SLACK_CHANNEL}
  users: {{{SLACK_MEMBER}: octocat}}
routing:
  budget: {{tokens: 1000}}
"""
pytestmark = [pytest.mark.slack, pytest.mark.sqlite_only]


OPERATOR_YAML = CONFIG


def stopped_by_its_budget(app: RunningApp) -> None:
    spent = {"run": 1, "spent": "tokens", "warned": True, "stops": 1}
    threaded_item(app, WorkItemStatus.STOPPED, phase="implementation", budget=spent)
    with app.state.sessions() as session, session.begin():
        add_usage(session, ITEM, {"input_tokens": 1200, "requests": 3})


def test_a_budget_typed_in_the_thread_raises_it_and_relaunches_the_item(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    fake_github[0].grant(REPO, "octocat", "write")
    stopped_by_its_budget(running_app)
    payload = copy.deepcopy(fixture_json("slack/event_callback.message.thread_reply.json"))
    payload["event"].update(text="the-loop budget +1k")
    assert post_slack(running_app.url, json.dumps(payload), form=False).status_code == 200
    [job] = wait_for(lambda: deliver_jobs(running_app), timeout=30)
    assert job.payload["source"] == "notice"
    assert job.payload["body"].startswith("the-loop: budget raised by @octocat (+1k tokens")
    with running_app.state.sessions() as session:
        item = session.get(WorkItem, ITEM)
        assert item is not None and item.state == WorkItemStatus.EXITED
        assert [r["by"] for r in item.budget["raises"]] == ["octocat"]
    ledger = [c["body"] for c in fake_github[0].issue_comments(REPO, 1)]
    assert any(b.startswith("the-loop budget +1k") for b in ledger)  # said on the issue too
