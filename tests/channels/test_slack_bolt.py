"""Bolt dispatch through the App's `/slack/events`, over the published Slack payloads, signed
for real, with the fake Slack Web API and the fake GitHub API on loopback."""

from __future__ import annotations

import copy
import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.gate.markers import MarkerKind, find_marker
from app.gate.textpin import pin
from app.store.tables import WorkItem, WorkItemStatus
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
    slack_signed,
)
from tests.support import RunningApp, fixture_bytes, fixture_json, wait_for

pytestmark = [pytest.mark.slack, pytest.mark.sqlite_only]


OPERATOR_YAML = SLACK_CONFIG


def add_item(app: RunningApp, state: WorkItemStatus, frozen: bool) -> None:
    with app.state.sessions() as session, session.begin():
        session.add(
            WorkItem(
                id=ITEM,
                repo_full_name=REPO,
                issue_number=1,
                installation_id=1,
                state=state,
                html_url=f"https://github.com/{REPO}/issues/1",
                frozen={"harness": "", "model": "", "effort": ""} if frozen else None,
                pinned=pin("", "", datetime.now(UTC)),  # the text its checklist was posted for
                slack_ts=SLACK_THREAD,
            )
        )


def event_body(name: str, **changes: Any) -> str:
    payload = copy.deepcopy(fixture_json(f"slack/{name}.json"))
    payload["event"].update(changes)
    return json.dumps(payload)


def test_url_verification_answers_the_challenge(running_app: RunningApp) -> None:
    body = fixture_bytes("slack/url_verification.json").decode()
    response = post_slack(running_app.url, body, form=False)
    assert response.status_code == 200
    assert response.json() == {
        "challenge": fixture_json("slack/url_verification.json")["challenge"]
    }


def test_unsigned_wrongly_signed_and_stale_requests_are_refused(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str]
) -> None:
    add_item(running_app, WorkItemStatus.RUNNING, frozen=True)
    body = event_body("event_callback.message.thread_reply")
    wrong = post_slack(running_app.url, body, form=False, secret="not-the-secret")
    stale_headers = {
        "Content-Type": "application/json",
        **slack_signed(body, ts=int(time.time()) - 3600),
    }
    stale = httpx.post(f"{running_app.url}/slack/events", content=body, headers=stale_headers)
    bare = httpx.post(f"{running_app.url}/slack/events", content=body)
    assert [wrong.status_code, stale.status_code, bare.status_code] == [401, 401, 401]
    time.sleep(0.3)
    assert relayed_comments(fake_github[0]) == []


def test_a_thread_reply_is_posted_attributed_and_delivered(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    add_item(running_app, WorkItemStatus.RUNNING, frozen=True)
    for ignored in (
        "event_callback.message.bot_in_thread",
        "event_callback.message.bot_message_subtype",
        "event_callback.message.thread_broadcast",
    ):
        body = event_body(ignored, channel=SLACK_CHANNEL, thread_ts=SLACK_THREAD)
        assert post_slack(running_app.url, body, form=False).status_code == 200
    body = event_body(
        "event_callback.message.thread_reply", text="use <https://x.dev|the spec> &amp; go"
    )
    assert post_slack(running_app.url, body, form=False).status_code == 200
    assert post_slack(running_app.url, body, form=False).status_code == 200  # Slack's retry
    [comment] = wait_for(lambda: relayed_comments(github))
    assert comment["body"].startswith(
        "use [the spec](https://x.dev) & go\n\n_from @octocat in Slack_"
    )
    assert find_marker(comment["body"]).kind == MarkerKind.SLACK
    [job] = wait_for(lambda: deliver_jobs(running_app))
    assert job.payload["author"] == "octocat" and job.payload["source"] == "slack"
    assert job.payload["comment_id"] == comment["id"]
    assert job.payload["body"] == "use [the spec](https://x.dev) & go"
    time.sleep(0.3)
    assert len(relayed_comments(github)) == 1 and slack.ephemerals == []


@pytest.mark.parametrize("member,role", [("U0STRANGER", "write"), (SLACK_MEMBER, "read")])
def test_a_reply_from_an_unmapped_or_unauthorized_member_changes_nothing(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
    member: str,
    role: str,
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", role)
    add_item(running_app, WorkItemStatus.RUNNING, frozen=True)
    body = event_body("event_callback.message.thread_reply", user=member)
    assert post_slack(running_app.url, body, form=False).status_code == 200
    [note] = wait_for(lambda: slack.ephemerals)
    assert note["user"] == member and note["text"].startswith("Not authorized")
    assert note["thread_ts"] == SLACK_THREAD
    assert relayed_comments(github) == [] and deliver_jobs(running_app) == []
    assert [e["source"] for e in running_app.events("comment.ignored")] == ["slack"]


def test_a_reply_in_a_thread_the_app_does_not_know_is_ignored(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    add_item(running_app, WorkItemStatus.RUNNING, frozen=True)
    body = event_body("event_callback.message.thread_reply", thread_ts="1111111111.000001")
    assert post_slack(running_app.url, body, form=False).status_code == 200
    time.sleep(0.5)
    assert relayed_comments(fake_github[0]) == [] and fake_slack[0].ephemerals == []


def test_ticks_and_link_clicks_are_acknowledged_and_do_nothing(running_app: RunningApp) -> None:
    payload = copy.deepcopy(fixture_json("slack/block_actions.checkboxes.json"))
    payload["actions"][0]["action_id"] = "the-loop-rows"
    response = post_slack(running_app.url, interaction_body(payload), form=True)
    assert response.status_code == 200


def test_an_execute_press_is_acknowledged_before_the_slow_work(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    """Slack allows 3 s: the ack must not wait for GitHub or for Slack's own API."""
    slack = fake_slack[0]
    slack.delays["chat.postEphemeral"] = 3.0
    payload = copy.deepcopy(fixture_json("slack/block_actions.button_in_thread.json"))
    payload["actions"][0].update(action_id="the-loop-execute", value=ITEM)
    started = time.monotonic()
    response = post_slack(running_app.url, interaction_body(payload), form=True)
    assert response.status_code == 200
    assert time.monotonic() - started < 2.0
    [note] = wait_for(lambda: slack.ephemerals, timeout=10)  # U00FAKEUSER1 is not mapped
    assert note["user"] == "U00FAKEUSER1" and note["text"].startswith("Not authorized")
    assert relayed_comments(fake_github[0]) == []


def test_a_typed_execute_in_the_thread_goes_through_the_gate(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    add_item(running_app, WorkItemStatus.PARKED, frozen=False)
    body = event_body("event_callback.message.thread_reply", text="The-Loop execute\n- [ ] design")
    assert post_slack(running_app.url, body, form=False).status_code == 200

    def frozen() -> dict[str, Any] | None:
        with running_app.state.sessions() as session:
            found = session.get(WorkItem, ITEM)
            return found.frozen if found else None

    record = wait_for(frozen)
    assert "design" in record["skips"] and record["decisions"]["phase-selection"]["by"] == "octocat"
    ledger = [c for c in github.issue_comments(REPO, 1) if "in Slack_" in c["body"]]
    assert [c["body"].splitlines()[:2] for c in ledger] == [["The-Loop execute", "- [ ] design"]]
    [reaction] = wait_for(lambda: slack.reactions)
    assert reaction == {
        "channel": SLACK_CHANNEL,
        "timestamp": "1775407883.655979",
        "name": "rocket",
    }
    assert deliver_jobs(running_app) == []  # an execute is never a follow-up


def test_when_github_refuses_the_reply_the_member_is_told_and_a_retry_can_succeed(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    add_item(running_app, WorkItemStatus.RUNNING, frozen=True)
    github.fail_next(r"/issues/1/comments$", 422)
    body = event_body("event_callback.message.thread_reply")
    assert post_slack(running_app.url, body, form=False).status_code == 200
    [note] = wait_for(lambda: slack.ephemerals)
    assert note["user"] == SLACK_MEMBER and note["text"].startswith("Something went wrong")
    assert deliver_jobs(running_app) == []
    assert post_slack(running_app.url, body, form=False).status_code == 200  # Slack retries
    [comment] = wait_for(lambda: relayed_comments(github))
    assert comment["body"].startswith("ping?")
    wait_for(lambda: deliver_jobs(running_app))
