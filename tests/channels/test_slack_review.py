"""The review gate from Slack: Approve and Request changes buttons (with its modal), through
the App's `/slack/events` over the published interaction payloads, signed for real, with the
fake Slack Web API and fake GitHub on loopback; and the thread's parent message updated in
place as the progress comment changes."""

from __future__ import annotations

import copy
import json
import time

import pytest

from app.store.tables import WorkItem, WorkItemStatus
from channels.walk_blocks import (
    APPROVE_ACTION,
    CHANGES_ACTION,
    CHANGES_BLOCK,
    CHANGES_INPUT,
    CHANGES_VIEW,
)
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.gate_support import ITEM, REPO
from tests.slack_support import (
    SLACK_CHANNEL,
    SLACK_CONFIG,
    SLACK_MEMBER,
    SLACK_THREAD,
    deliver_jobs,
    interaction_body,
    post_slack,
    relayed_comments,
    threaded_item,
)
from tests.support import RunningApp, fixture_json, wait_for

pytestmark = [
    pytest.mark.slack,
    pytest.mark.sqlite_only,
]


OPERATOR_YAML = SLACK_CONFIG


def at_review(app: RunningApp) -> None:
    threaded_item(app, WorkItemStatus.RUNNING, phase="review", artifacts=["design.md"])


def row(app: RunningApp) -> WorkItem:
    with app.state.sessions(expire_on_commit=False) as session:
        found = session.get(WorkItem, ITEM)
        assert found is not None
        return found


def press(action_id: str, member: str = SLACK_MEMBER) -> str:
    payload = copy.deepcopy(fixture_json("slack/block_actions.button_in_thread.json"))
    payload["actions"][0].update(action_id=action_id, value=ITEM)
    payload["user"]["id"] = member
    payload["container"]["channel_id"] = SLACK_CHANNEL
    return interaction_body(payload)


def test_approve_is_recorded_on_github_and_delivered(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    at_review(running_app)
    assert post_slack(running_app.url, press(APPROVE_ACTION), form=True).status_code == 200
    [job] = wait_for(lambda: deliver_jobs(running_app))
    assert job.payload["gates"]["review"]["by"] == "octocat"
    assert job.payload["source"] == "slack"
    ledger = [c for c in github.issue_comments(REPO, 1) if "in Slack_" in c["body"]]
    assert [c["body"].splitlines()[0] for c in ledger] == ["the-loop approve"]
    [update] = wait_for(lambda: [u for u in slack.updates if "Approved" in str(u["text"])])
    assert "@octocat" in update["text"]
    assert post_slack(running_app.url, press(APPROVE_ACTION), form=True).status_code == 200
    time.sleep(0.5)
    assert len(deliver_jobs(running_app)) == 1  # a second press changes nothing


def test_approve_at_an_approval_gate_lets_the_session_go_on(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    stops = {"stops": ["approve-design"], "skips": {"approve-tasks": {}}}
    threaded_item(running_app, WorkItemStatus.RUNNING, phase="approve-design", frozen=stops)
    assert post_slack(running_app.url, press(APPROVE_ACTION), form=True).status_code == 200
    [job] = wait_for(lambda: deliver_jobs(running_app))
    assert job.payload["gates"]["approve-design"]["by"] == "octocat"
    assert "approved `design` at `approve-design`" in job.payload["body"]
    assert "Run `the-loop phase next` to go on to `test-planning`" in job.payload["body"]
    assert row(running_app).phase == "approve-design"  # the session's `phase next` moves it
    [update] = wait_for(lambda: [u for u in slack.updates if "Approved" in str(u["text"])])
    assert "The session goes on." in json.dumps(update["blocks"])


def test_an_unauthorized_press_changes_nothing(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "read")
    at_review(running_app)
    assert post_slack(running_app.url, press(APPROVE_ACTION), form=True).status_code == 200
    [note] = wait_for(lambda: slack.ephemerals)
    assert note["user"] == SLACK_MEMBER and note["text"].startswith("Not authorized")
    assert "review" not in (row(running_app).gates or {})
    assert relayed_comments(github) == [] and deliver_jobs(running_app) == []


def test_request_changes_opens_a_modal_whose_words_reach_the_session(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    at_review(running_app)
    assert post_slack(running_app.url, press(CHANGES_ACTION), form=True).status_code == 200
    [view] = wait_for(lambda: slack.views)
    assert view["callback_id"] == CHANGES_VIEW and view["private_metadata"].startswith(ITEM)
    submission = copy.deepcopy(fixture_json("slack/view_submission.json"))
    submission["user"]["id"] = SLACK_MEMBER
    submission["view"].update(
        id=view["id"],
        callback_id=CHANGES_VIEW,
        private_metadata=view["private_metadata"],
        state={
            "values": {
                CHANGES_BLOCK: {
                    CHANGES_INPUT: {"type": "plain_text_input", "value": "Cover the empty list."}
                }
            }
        },
    )
    response = post_slack(running_app.url, interaction_body(submission), form=True)
    assert response.status_code == 200
    [job] = wait_for(lambda: deliver_jobs(running_app))
    assert job.payload["body"].startswith("Cover the empty list.")
    assert job.payload["phase"] == "implementation"
    assert row(running_app).phase == "implementation"
    ledger = [c["body"] for c in github.issue_comments(REPO, 1) if "in Slack_" in c["body"]]
    assert ledger and ledger[0].startswith("the-loop changes Cover the empty list.")


def test_a_typed_approve_in_the_thread_is_a_decision_not_a_follow_up(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github = fake_github[0]
    github.grant(REPO, "octocat", "write")
    at_review(running_app)
    payload = copy.deepcopy(fixture_json("slack/event_callback.message.thread_reply.json"))
    payload["event"].update(text="the-loop approve")
    assert post_slack(running_app.url, json.dumps(payload), form=False).status_code == 200
    [job] = wait_for(lambda: deliver_jobs(running_app))
    assert job.payload["gates"]["review"]["by"] == "octocat"
    assert "Run `the-loop phase next` to complete" in job.payload["body"]


def test_the_thread_parent_mirrors_progress_in_place(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    slack = fake_slack[0]
    at_review(running_app)
    with running_app.state.sessions() as session, session.begin():
        item = session.get(WorkItem, ITEM)
        assert item is not None
        item.state = WorkItemStatus.STALLED
        item.session = {"stall": "permission-prompt", "stall_hint": "answer it in tmux"}
    updated = wait_for(lambda: [u for u in slack.updates if u["ts"] == SLACK_THREAD], timeout=15)
    text = str(updated[-1]["blocks"])
    assert "stalled" in text and "permission prompt" in text
    assert ":hourglass_flowing_sand: `review` waiting on a human" in text
    assert "running" not in updated[-1]["text"]
    assert not [m for m in slack.messages if m.get("ts") == SLACK_THREAD]  # updated, not re-posted
