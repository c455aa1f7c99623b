"""Allowing a refused host from Slack, end to end: a session's proxy (the spawner's real
`SessionNetworks`, on real unix sockets) refuses a host; its events, reported to the App over
real HTTP, leave one message with an Allow button in the item's Slack thread (fake Slack)
however often the session knocks, and none for the harness's own hosts. A press, signed for
real and dispatched by the App's Bolt app, changes nothing for a member who may not decide;
an authorized member's press is posted on the issue (fake GitHub) as their `the-loop allow`
and becomes the allow job the spawner claims and runs through its own dispatch, after which
the same session's next CONNECT goes through, with no relaunch, and the thread and the issue
say how to allow the host for good."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.fleet.tokens import create_token
from app.protocol import parse_payload
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.network.netgates import SessionNetworks
from app.spawner.network.netplan import NetPlan
from app.store.tables import Job, JobKind, WorkItemStatus
from channels.allow_blocks import ALLOW_ACTION
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.gate_support import ITEM, REPO
from tests.slack_support import (
    SLACK_CHANNEL,
    SLACK_CONFIG,
    SLACK_MEMBER,
    SLACK_THREAD,
    interaction_body,
    post_slack,
    relayed_comments,
    threaded_item,
)
from tests.spawner_support import talk_unix
from tests.spawnerapi_support import SpawnerClient
from tests.support import RunningApp, fixture_json, wait_for

pytestmark = [pytest.mark.slack, pytest.mark.sqlite_only]

OPERATOR_YAML = SLACK_CONFIG
READER = "UQEUMSA0K"  # mapped to daan, who may only read the repository
STRANGER = "U00FAKEUSER1"  # in no `slack.users`


def allow_jobs(app: RunningApp) -> list[Job]:
    with app.state.sessions() as session:
        return list(session.scalars(select(Job).where(Job.kind == JobKind.ALLOW)))


def allow_buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        element
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for element in block["elements"]
        if element.get("action_id") == ALLOW_ACTION
    ]


def in_thread(slack: FakeSlack, words: str) -> list[dict[str, Any]]:
    return [m for m in slack.thread(SLACK_THREAD) if words in json.dumps(m["blocks"])]


def press(button: dict[str, Any], message_ts: str, member: str) -> str:
    payload = copy.deepcopy(fixture_json("slack/block_actions.button_in_thread.json"))
    payload["actions"][0].update(action_id=ALLOW_ACTION, value=button["value"])
    payload["user"]["id"] = member
    payload["trigger_id"] = uuid.uuid4().hex  # each press is its own
    payload["container"].update(
        channel_id=SLACK_CHANNEL, message_ts=message_ts, thread_ts=SLACK_THREAD
    )
    return interaction_body(payload)


def spawner_for(app: RunningApp) -> SpawnerClient:
    with app.state.sessions() as session, session.begin():
        token = create_token(session, "devbox", [REPO])
    return SpawnerClient(app.url, token)


def test_a_refused_host_gets_an_allow_button_that_opens_it_live_for_a_member_who_may_decide(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
    ctx: SpawnerContext,
    far_echo: int,
    tmp_path: Path,
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    github.grant(REPO, "daan", "read")
    threaded_item(running_app, WorkItemStatus.RUNNING)
    spawner = spawner_for(running_app)
    reported: list[dict[str, Any]] = []

    def emit(event: str, work_item_id: str, **fields: Any) -> None:
        reported.append({"id": uuid.uuid4().hex, "event": event, "work_item_id": ITEM, **fields})

    nets = SessionNetworks(tmp_path / "net", emit)
    ctx.networks = nets
    target = f"127.0.0.1:{far_echo}"
    plan = NetPlan((), 3128, frozenset(), "http://127.0.0.1:9", quiet=frozenset({"own.test"}))
    tunnel = f"CONNECT {target} HTTP/1.1\r\n\r\nhello\n".encode()
    try:
        proxy = nets.open(ITEM, plan) / "proxy.sock"
        for _ in range(3):  # the session knocks, and knocks again
            assert talk_unix(proxy, tunnel).startswith(b"HTTP/1.1 403 Forbidden")
        talk_unix(proxy, b"CONNECT own.test:443 HTTP/1.1\r\n\r\n")  # the harness's own
        assert spawner.events(*reported).status_code == 200

        (message,) = wait_for(lambda: in_thread(slack, "network refused"))
        (button,) = allow_buttons(message)
        assert button["text"]["text"] == f"Allow {target}"
        assert f"`the-loop allow {target}`" in json.dumps(message["blocks"])
        assert not in_thread(slack, "own.test") and not in_thread(slack, "egress_refused")
        assert len(in_thread(slack, "network refused")) == 1  # one message, however many knocks

        # Nobody who may not decide changes anything: each is told so, only them.
        for member in (STRANGER, READER):
            response = post_slack(running_app.url, press(button, message["ts"], member), form=True)
            assert response.status_code == 200
            (note,) = wait_for(lambda m=member: [e for e in slack.ephemerals if e["user"] == m])
            assert note["text"].startswith("Not authorized")
        assert allow_jobs(running_app) == []
        assert not [c for c in relayed_comments(github) if "in Slack_" in c["body"]]
        assert talk_unix(proxy, tunnel).startswith(b"HTTP/1.1 403")

        response = post_slack(
            running_app.url, press(button, message["ts"], SLACK_MEMBER), form=True
        )
        assert response.status_code == 200
        (job,) = wait_for(lambda: allow_jobs(running_app))
        ledger = [c["body"] for c in relayed_comments(github) if "in Slack_" in c["body"]]
        assert [body.splitlines()[0] for body in ledger] == [f"the-loop allow {target}"]
        (update,) = wait_for(lambda: [u for u in slack.updates if u["ts"] == message["ts"]])
        assert "@octocat asked to let" in json.dumps(update["blocks"])
        assert allow_buttons(update) == []  # pressed once, the button is gone

        claimed = spawner.job(wait=30)
        assert claimed is not None and claimed["id"] == job.id and claimed["kind"] == "allow"
        assert claimed["payload"]["author"] == "octocat"
        payload = parse_payload("allow", claimed["payload"])
        ok, result, error = run_job(ctx, ClaimedJob(claimed["id"], payload))
        assert (ok, result, error) == (True, {"allowed": True}, None)
        # The same session, not relaunched: its next CONNECT goes through.
        assert talk_unix(proxy, tunnel) == (
            b"HTTP/1.1 200 Connection established\r\n\r\necho: hello\n"
        )
        assert spawner.result(claimed["id"], ok=True, **result).status_code == 200
        (answer,) = wait_for(lambda: in_thread(slack, "let through for this item"))
        for_good = f"add `{target}` to `routing.sandbox.egress`"
        assert for_good in json.dumps(answer["blocks"]) and allow_buttons(answer) == []
        assert wait_for(lambda: [c for c in relayed_comments(github) if for_good in c["body"]])
    finally:
        nets.stop()


def test_a_typed_allow_in_the_thread_is_the_same_decision_not_a_follow_up(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    fake_github[0].grant(REPO, "octocat", "write")
    threaded_item(running_app, WorkItemStatus.RUNNING)
    payload = copy.deepcopy(fixture_json("slack/event_callback.message.thread_reply.json"))
    payload["event"].update(text="the-loop allow pypi.example.org:443")
    assert post_slack(running_app.url, json.dumps(payload), form=False).status_code == 200
    (job,) = wait_for(lambda: allow_jobs(running_app))
    assert (job.payload["host"], job.payload["port"]) == ("pypi.example.org", 443)
    assert (job.payload["author"], job.payload["source"]) == ("octocat", "slack")
    with running_app.state.sessions() as session:
        delivered = session.scalars(select(Job).where(Job.kind == JobKind.DELIVER)).all()
    assert delivered == []
