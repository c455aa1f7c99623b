"""The outbox and its sender against a fake Slack Web API on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.config.process_settings import load_settings
from app.store import Sessions
from app.store.tables import Event, SlackOutbox, WorkItem
from channels import outbox
from channels.sender import SlackMirror, SlackSender
from channels.wiring import web_client
from tests.fakes.slack_api import FakeSlack
from tests.slack_support import (
    ISSUE_URL,
    MIRROR_CHANNEL,
    FakeClock,
    mirror_item,
    sample_checklist,
    started_payload,
)
from tests.support import wait_for


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sender(
    engine: Engine, fake_slack: tuple[FakeSlack, str], clock: FakeClock, tmp_path: Path
) -> SlackSender:
    settings = load_settings(
        {"SLACK_BOT_TOKEN": fake_slack[0].token, "SLACK_API_URL": fake_slack[1]}, dotenv=None
    )
    events = EventLog(tmp_path / "events.jsonl", engine)
    return SlackSender(Sessions(engine), events, web_client(settings), MIRROR_CHANNEL, clock=clock)


def post(engine: Engine, mirror: SlackMirror, item: str, kind: str, **payload: Any) -> None:
    with Session(engine) as session, session.begin():
        mirror.post(session, item, kind, {"url": ISSUE_URL, **payload})


def events(engine: Engine, name: str) -> list[dict[str, Any]]:
    with Session(engine) as session:
        rows = session.scalars(select(Event).where(Event.event == name).order_by(Event.id))
        return [row.data for row in rows]


def thread_ts(engine: Engine, item: str) -> str | None:
    with Session(engine) as session:
        found = session.get(WorkItem, item)
        return found.slack_ts if found else None


def test_first_message_opens_the_thread_and_later_ones_reply_in_it(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 1)
    post(engine, mirror, item, "item_started", **started_payload(1))
    post(engine, mirror, item, "checklist", **sample_checklist())
    post(engine, mirror, item, "refused", who="mallory", why="no permission")
    assert sender.drain() == 3
    parent, *replies = fake.posted(MIRROR_CHANNEL)
    assert parent["thread_ts"] is None and parent["text"].startswith("Codertocat/Hello-World#1")
    assert [r["thread_ts"] for r in replies] == [parent["ts"], parent["ts"]]
    assert thread_ts(engine, item) == parent["ts"]
    mirrored = events(engine, "slack.mirrored")
    assert [e["kind"] for e in mirrored] == ["item_started", "checklist", "refused"]
    assert {e["thread_ts"] for e in mirrored} == {parent["ts"]}


def test_nothing_is_sent_for_a_transaction_that_rolled_back(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 2)
    with Session(engine) as session:
        session.begin()
        mirror.post(session, item, "item_started", {"url": ISSUE_URL, **started_payload(2)})
        session.rollback()
    assert sender.drain() == 0
    assert fake_slack[0].posted() == []


def test_a_failing_item_waits_in_order_while_other_items_go_on(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str], clock: FakeClock
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    first, second = mirror_item(engine, 3), mirror_item(engine, 4)
    post(engine, mirror, first, "item_started", **started_payload(3))
    post(engine, mirror, first, "refused", who="a", why="first")
    post(engine, mirror, second, "item_started", **started_payload(4))
    fake.fail_next("chat.postMessage", 500)
    sender.drain()
    assert [m["text"] for m in fake.posted()] == [
        "Codertocat/Hello-World#4: Issue 4 — labelled for the-loop"
    ]
    failed = events(engine, "slack.failed")
    assert [(e["work_item_id"], e["status"], e["retry_in"]) for e in failed] == [(first, 500, 1.0)]
    assert outbox.status(Sessions(engine)).retrying == 1
    clock.advance(1)
    sender.drain()
    texts = [m["text"] for m in fake.posted() if "#3" in m["text"] or "first" in m["text"]]
    assert texts[0].startswith("Codertocat/Hello-World#3") and "first" in texts[1]
    assert outbox.status(Sessions(engine)).healthy


def test_rate_limit_waits_exactly_retry_after_and_pauses_every_send(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str], clock: FakeClock
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    first, second = mirror_item(engine, 5), mirror_item(engine, 6)
    post(engine, mirror, first, "item_started", **started_payload(5))
    post(engine, mirror, second, "item_started", **started_payload(6))
    fake.fail_next("chat.postMessage", 429, retry_after=7)
    assert sender.drain() == 1
    assert fake.posted() == []  # the other item waits too: the limit is per workspace
    assert events(engine, "slack.failed")[0]["retry_in"] == 7.0
    clock.advance(6)
    assert sender.drain() == 0
    clock.advance(1)
    assert sender.drain() == 2
    assert len(fake.posted()) == 2


def test_a_revoked_token_keeps_messages_until_slack_accepts_again(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str], clock: FakeClock
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 7)
    post(engine, mirror, item, "item_started", **started_payload(7))
    fake.revoked = True
    for _ in range(3):
        sender.drain()
        clock.advance(300)
    assert [e["error"] for e in events(engine, "slack.failed")] == ["token_revoked"] * 3
    assert outbox.status(Sessions(engine)).last_error == "token_revoked"
    fake.revoked = False
    sender.drain()
    assert len(fake.posted()) == 1 and thread_ts(engine, item) is not None


def test_blocks_slack_refuses_fall_back_to_the_plain_text(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 8)
    post(engine, mirror, item, "item_started", **started_payload(8))
    fake.fail_next("chat.postMessage", 200, error="invalid_blocks")
    sender.drain()
    [message] = fake.posted()
    assert message["blocks"] is None and "Issue 8" in message["text"]


def test_a_slack_reply_gets_a_receipt_when_the_session_has_it(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 9)
    ref = f"slack-reply:{MIRROR_CHANNEL}:1770000000.000555"
    post(engine, mirror, item, "session", event="session.delivered", source="slack", ref=ref)
    post(engine, mirror, item, "session", event="session.delivered", source="github", ref="12")
    sender.drain()
    assert fake.reactions == [
        {"channel": MIRROR_CHANNEL, "timestamp": "1770000000.000555", "name": "eyes"}
    ]


def test_concurrent_senders_send_each_message_once_in_order(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str], tmp_path: Path
) -> None:
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    items = [mirror_item(engine, n) for n in range(20, 24)]
    for step in range(5):
        for item in items:
            post(engine, mirror, item, "refused", who=item, why=f"step {step}")
    others = [
        SlackSender(
            Sessions(engine), sender.events, sender.client, MIRROR_CHANNEL, clock=sender.clock
        )
        for _ in range(3)
    ]
    threads = [threading.Thread(target=s.drain) for s in [sender, *others]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(fake.posted()) == 20
    for item in items:
        steps = [m["text"] for m in fake.posted() if f"@{item} refused" in m["text"]]
        assert steps == [f"Execute by @{item} refused: step {n}" for n in range(5)]
    with Session(engine) as session:
        states = session.scalars(select(SlackOutbox.state)).all()
    assert set(states) == {"sent"}


def test_the_sender_thread_wakes_when_the_transaction_commits(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    sender.poll = 30  # only the commit hook can wake it in time
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 10)
    mirror.start()
    try:
        wait_for(lambda: sender._thread is not None and sender._thread.is_alive())
        post(engine, mirror, item, "item_started", **started_payload(10))
        wait_for(lambda: fake_slack[0].posted(), timeout=5)
    finally:
        mirror.stop()


def test_github_words_reach_slack_escaped_in_the_text_and_the_blocks(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    """An issue title (or a login, a refusal reason) can never ping the channel or show a
    link other than the one it spells, in the notification text as in the blocks."""
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 9)
    title = "<!channel> see <http://evil.example|the docs> & <@U024BE7LH>"
    post(engine, mirror, item, "item_started", **{**started_payload(9), "title": title})
    post(engine, mirror, item, "refused", who="<!here>", why="<https://x.example|ok> & go")
    post(engine, mirror, item, "session", event="session.stalled", reason="<!everyone> now")
    sender.drain()
    messages = fake.posted(MIRROR_CHANNEL)
    assert len(messages) == 3
    for message in messages:
        everything = message["text"] + json.dumps(message["blocks"])
        for raw in (
            "<!channel>",
            "<!here>",
            "<!everyone>",
            "<http://evil",
            "<https://x.",
            "<@U024",
        ):
            assert raw not in everything, (raw, message["text"])
    started_text = messages[0]["text"]
    assert "&lt;!channel&gt; see &lt;http://evil.example|the docs&gt; &amp;" in started_text
    assert "&amp;lt;" not in "".join(m["text"] for m in messages)  # escaped once, not twice


def outbox_rows(engine: Engine, item: str) -> list[tuple[str, str, str | None]]:
    with Session(engine) as session:
        rows = session.scalars(
            select(SlackOutbox).where(SlackOutbox.work_item_id == item).order_by(SlackOutbox.id)
        )
        return [(row.kind, row.state, row.last_error) for row in rows]


def test_one_bad_message_is_parked_with_its_error_and_the_thread_goes_on(
    engine: Engine, sender: SlackSender, fake_slack: tuple[FakeSlack, str]
) -> None:
    """A comment holding what once broke the renderer goes out as text; a payload no
    renderer takes and a message Slack refuses for itself are parked with their errors;
    every later message of the thread still goes out, in order."""
    fake = fake_slack[0]
    mirror = SlackMirror(sender)
    item = mirror_item(engine, 10)
    post(engine, mirror, item, "item_started", **started_payload(10))
    post(engine, mirror, item, "agent_comment", body="\x007\x00 see [docs](https://x.dev)")
    post(engine, mirror, item, "review", artifacts=7)  # not a list: no renderer takes it
    post(engine, mirror, item, "refused", who="a", why="too long for Slack")
    post(engine, mirror, item, "done", reason="finished")
    fake.fail_next("chat.postMessage", 200, error="msg_too_long")  # the item_started...
    sender.drain()
    # ...is refused for itself too; the thread then opens with the next message
    texts = [m["text"] for m in fake.posted(MIRROR_CHANNEL)]
    assert len(texts) == 3, texts
    assert texts[0].startswith("The agent says: \ufffd7\ufffd see docs (https://x.dev)")
    assert "too long for Slack" in texts[1] and texts[2] == "The work item is done."
    [comment] = [m for m in fake.posted(MIRROR_CHANNEL) if m["text"] == texts[0]]
    assert "<https://x.dev|docs>" in json.dumps(comment["blocks"])
    rows = outbox_rows(engine, item)
    assert [(kind, state) for kind, state, _ in rows] == [
        ("item_started", "failed"),
        ("agent_comment", "sent"),
        ("review", "failed"),
        ("refused", "sent"),
        ("done", "sent"),
    ]
    assert rows[0][2] == "msg_too_long"
    assert rows[2][2] is not None and rows[2][2].startswith("render: TypeError")
    failed = events(engine, "slack.failed")
    assert [(e["kind"], e["permanent"]) for e in failed] == [
        ("item_started", True),
        ("review", True),
    ]
