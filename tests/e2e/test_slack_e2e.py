"""End to end: a labelled issue opens a Slack thread with the checklist control; Execute in
Slack freezes exactly what was pressed and records it on the issue; Slack outages never
hold up GitHub. Real App, inbox worker and sender; fake GitHub and Slack APIs on loopback."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from sqlalchemy import select

from app.gate.markers import MarkerKind, find_marker
from app.store.tables import Job, JobKind, Spawner, WorkItem
from channels.checklist_control import EXECUTE_ACTION
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlack
from tests.slack_support import interaction_body, post_slack
from tests.support import RunningApp, fixture_json, post_webhook, wait_for, with_installation

pytestmark = pytest.mark.slack

REPO = "Codertocat/Hello-World"
ITEM = f"github:{REPO}#1"
CHANNEL = "C0LOOP0001"
MEMBER = "U024BE7LH"
CONFIG = f"""
harnesses:
  - {{name: claude, default: true}}
  - {{name: codex}}
models:
  - {{name: opus}}
  - {{name: sonnet}}
effort: [low, high]
slack:
  channel: {CHANNEL}
  users: {{{MEMBER}: octocat}}
"""


OPERATOR_YAML = CONFIG


def label(app: RunningApp) -> None:
    payload = with_installation(fixture_json("github/issues.labeled.json"))
    payload["label"] = {**payload["label"], "name": "the-loop: auto-execute"}
    assert post_webhook(app.url, "issues", payload).status_code == 202


def thread(slack: FakeSlack, count: int) -> list[dict[str, Any]] | None:
    """The parent message and its replies, once there are `count` messages in all."""
    top = [m for m in slack.posted(CHANNEL) if m["thread_ts"] is None]
    if not top:
        return None
    messages = [top[0], *slack.thread(top[0]["ts"])]
    return messages if len(messages) >= count else None


def press(blocks: list[dict[str, Any]], untick: set[str], pick: set[str]) -> dict[str, Any]:
    """`state.values` as a Slack client reports it after the member changed the control."""
    values: dict[str, Any] = {}
    for block in blocks:
        if block["type"] != "input":
            continue
        element = block["element"]
        options = element["options"]
        if element["type"] == "checkboxes":
            initial = element.get("initial_options", [])
            chosen = [o for o in options if (o in initial or o["value"] in pick)]
            chosen = [o for o in chosen if o["value"] not in untick]
            state = {"type": "checkboxes", "selected_options": chosen}
        else:
            mine = [o for o in options if o["value"] in pick]
            state = {
                "type": element["type"],
                "selected_option": mine[0] if mine else element.get("initial_option"),
            }
        values[block["block_id"]] = {element["action_id"]: state}
    return values


def execute_press(
    member: str, parent: dict[str, Any], checklist: dict[str, Any], values: Any
) -> str:
    """The published threaded button press, re-aimed at our Execute button and message."""
    payload = copy.deepcopy(fixture_json("slack/block_actions.button_in_thread.json"))
    payload["user"]["id"] = member
    payload["channel"]["id"] = CHANNEL
    payload["container"].update(
        channel_id=CHANNEL, message_ts=checklist["ts"], thread_ts=parent["ts"]
    )
    payload["message"].update(ts=checklist["ts"], thread_ts=parent["ts"])
    payload["actions"] = [
        {
            "type": "button",
            "block_id": "the-loop-execute",
            "action_id": EXECUTE_ACTION,
            "value": ITEM,
            "text": {"type": "plain_text", "text": "Execute"},
            "action_ts": "1767326130.289415",
        }
    ]
    payload["state"] = {"values": values}
    return interaction_body(payload)


def item(app: RunningApp) -> WorkItem | None:
    with app.state.sessions() as session:
        return session.get(WorkItem, ITEM)


def slack_comments(github: FakeGitHub) -> list[dict[str, Any]]:
    return [
        c
        for c in github.issue_comments(REPO, 1)
        if (m := find_marker(c["body"])) is not None and m.kind == MarkerKind.SLACK
    ]


def test_execute_in_slack_freezes_what_was_pressed_and_records_it_on_the_issue(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", "write")
    with running_app.state.sessions() as session, session.begin():
        session.add(
            Spawner(name="devbox", token_hash="x" * 64, serves=["*"], harnesses=["claude", "codex"])
        )
    label(running_app)
    parent, checklist = wait_for(lambda: thread(slack, 2))
    assert "Codertocat/Hello-World#1" in parent["text"]
    radios = [b["element"] for b in checklist["blocks"] if b["type"] == "input"]
    harness = next(r for r in radios if r["options"][0]["value"].startswith("harness-"))
    assert harness["type"] == "radio_buttons"
    assert harness["initial_option"]["value"] == "harness-claude"  # the default, pre-selected
    executes = [
        e["value"]
        for b in checklist["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == EXECUTE_ACTION
    ]
    assert executes == [ITEM]

    picks = {"harness-codex", "model-sonnet", "effort-high"}
    values = press(checklist["blocks"], untick={"design"}, pick=picks)
    body = execute_press(MEMBER, parent, checklist, values)
    assert post_slack(running_app.url, body, form=True).status_code == 200

    frozen = wait_for(lambda: (found := item(running_app)) and found.frozen)
    assert (frozen["harness"], frozen["model"], frozen["effort"]) == ("codex", "sonnet", "high")
    assert "design" in frozen["skips"]  # unticked in Slack
    assert not {"requirements-definition", "test-planning"} & set(frozen["skips"])
    assert frozen["decisions"]["phase-selection"]["by"] == "octocat"
    [ledger] = slack_comments(github)
    text, attribution = ledger["body"].split("\n\n_from", 1)
    lines = text.splitlines()
    assert lines[0] == "the-loop execute" and "- [ ] design" in lines
    assert "- [x] model-sonnet" in lines and "- [ ] model-opus" in lines
    assert "- [x] effort-high" in lines and "- [ ] effort-low" in lines
    assert attribution.startswith(" @octocat in Slack_")
    with running_app.state.sessions() as session:
        [job] = session.scalars(select(Job).where(Job.kind == JobKind.SPAWN)).all()
    assert job.payload["frozen"]["model"] == "sonnet"
    # the checklist's own updates (the thread's parent is updated too, with the progress)
    updates = wait_for(lambda: [u for u in slack.updates if u["ts"] == checklist["ts"]])
    for update in updates:  # from the press, and again when the confirmation is mirrored
        assert "frozen by @octocat" in update["text"]
        assert not any(b["type"] == "input" for b in update["blocks"])
        assert "*Model:* `sonnet`" in str(update["blocks"])
    confirmation = wait_for(lambda: (t := thread(slack, 3)) and t[2])
    assert confirmation["text"].startswith("Selection frozen")
    assert "*Harness:* `codex`" in str(confirmation["blocks"])  # the mirror names the harness

    again = execute_press(MEMBER, parent, checklist, values).replace("1767326130", "1767326199")
    assert post_slack(running_app.url, again, form=True).status_code == 200
    [note] = wait_for(lambda: slack.ephemerals)
    assert note["text"].startswith("Already executed")
    assert len(slack_comments(github)) == 1


@pytest.mark.parametrize("member,role", [("U0STRANGER", "write"), (MEMBER, "read")])
def test_execute_by_an_unmapped_or_unauthorized_member_is_refused(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
    member: str,
    role: str,
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "octocat", role)
    label(running_app)
    parent, checklist = wait_for(lambda: thread(slack, 2))
    comments_before = len(github.issue_comments(REPO, 1))
    values = press(checklist["blocks"], untick=set(), pick={"model-opus"})
    body = execute_press(member, parent, checklist, values)
    assert post_slack(running_app.url, body, form=True).status_code == 200
    [note] = wait_for(lambda: slack.ephemerals)
    assert note["user"] == member and note["text"].startswith("Not authorized")
    assert len(github.issue_comments(REPO, 1)) == comments_before
    assert item(running_app).frozen is None and slack.updates == []
    [refusal] = running_app.events("gate.refused")
    assert refusal["source"] == "slack"


@pytest.mark.parametrize("status", [500, 429])
def test_a_slack_outage_never_holds_up_github_and_messages_follow_once_it_recovers(
    running_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
    status: int,
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    slack.outage(status, retry_after=1 if status == 429 else None)
    label(running_app)
    wait_for(lambda: running_app.events("gate.checklist_posted"))
    assert any(find_marker(c["body"]) for c in github.issue_comments(REPO, 1))
    failed = wait_for(lambda: running_app.events("slack.failed"))
    assert failed[0]["kind"] == "item_started" and failed[0]["status"] == status
    assert slack.posted() == []
    slack.recover()
    parent, checklist = wait_for(lambda: thread(slack, 2), timeout=15)
    assert "Hello-World#1" in parent["text"] and checklist["text"].startswith("Phase selection")
    assert item(running_app).slack_ts == parent["ts"]
    mirrored = wait_for(lambda: (e := running_app.events("slack.mirrored")) and len(e) == 2 and e)
    assert [e["kind"] for e in mirrored] == ["item_started", "checklist"]


def test_an_execute_typed_on_github_closes_the_slack_control(
    running_app: RunningApp, fake_github: tuple[FakeGitHub, str], fake_slack: tuple[FakeSlack, str]
) -> None:
    github, slack = fake_github[0], fake_slack[0]
    github.grant(REPO, "Codertocat", "write")
    label(running_app)
    _parent, checklist = wait_for(lambda: thread(slack, 2))
    reply = copy.deepcopy(fixture_json("github/issue_comment.created.with-installation.json"))
    reply["comment"]["body"] = "the-loop execute\n- [x] model-opus"
    assert post_webhook(running_app.url, "issue_comment", reply).status_code == 202
    # the checklist's own update (the thread's parent may be updated too, with the progress)
    update = wait_for(lambda: next((u for u in slack.updates if u["ts"] == checklist["ts"]), 0))
    assert "frozen by @Codertocat" in update["text"]
    assert "*Model:* `opus`" in str(update["blocks"])
    confirmation = wait_for(lambda: (t := thread(slack, 3)) and t[2])
    assert confirmation["text"].startswith("Selection frozen")
