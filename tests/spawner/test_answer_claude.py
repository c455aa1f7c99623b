"""Answering a real permission dialog from Slack and GitHub, with the real `claude` binary
driven offline by the scripted model.

Claude Code runs in the default permission mode (no bypass): the model's `Write` call makes
it ask "Do you want to create answered.txt?". The devbox watchdog sees the dialog and reports
its question and options; the App announces it on the issue (fake GitHub) and in Slack (fake
Slack) with one button per option. An out-of-range `the-loop answer 9` and a press by a
member who may not execute change nothing; an authorized press of "1. Yes" sends Enter into
the pane, the file is written, the model is shown the tool's result, and the stall clears.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from app.config.operator_config import parse_config
from app.gate.markers import MarkerKind
from app.spawner.context import SpawnerContext
from app.store.tables import Job, JobKind
from channels.answer_blocks import ANSWER_ACTION_PREFIX
from tests.claude_support import (
    GENEROUS,
    claude_binary,
    report_timing,
)
from tests.devbox_support import running_devbox, scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, contains, tool_result_for
from tests.fakes.model_script import write
from tests.fakes.slack_api import FakeSlack
from tests.gate_support import ITEM, REPO, comment, deliver, item_row, labeled, marked
from tests.slack_support import interaction_body, post_slack
from tests.spawner_support import bare_repository
from tests.support import RunningApp, fixture_json, wait_for

pytestmark = [
    pytest.mark.claude,
    pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True),
    pytest.mark.slack,
]
ROOT = Path(__file__).resolve().parents[2]
CHANNEL = "C08REALCHAN1"
MEMBER = "U08REALUSER1"  # octocat: may execute
READER = "UQEUMSA0K"  # daan: may only read
EXECUTE = (
    "the-loop execute\n- [ ] requirements-definition\n- [ ] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n"
)


def the_script() -> list[Step]:
    return [
        Step(
            contains("Work on the GitHub issue"),
            Reply("Writing the file.", (write("answered.txt", "yes\n"),)),
            name="write",
        ),
        Step(tool_result_for("Write"), Reply("The file is written."), name="written"),
    ]


MODEL_SCRIPT = the_script


def operator_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "harnesses": [
            {
                "name": "claude",
                "default": True,
                "command": claude_binary(),
                "args": ["--permission-mode", "default"],
            }
        ],
        "routing": {"workspace": {"root": str(tmp_path / "work")}},
        "slack": {"channel": CHANNEL, "users": {MEMBER: "octocat", READER: "daan"}},
    }


def operator_yaml_of(tmp_path: Path) -> str:
    return yaml.safe_dump(operator_config(tmp_path))


OPERATOR_YAML = operator_yaml_of


@pytest.fixture
def answering_devbox(
    running_app: RunningApp, model: FakeAnthropic, tmp_path: Path
) -> Iterator[SpawnerContext]:
    home = scripted_home(tmp_path)
    config = parse_config(operator_config(tmp_path))
    env = scripted_env(model.url, home)
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    engine = running_app.state.engine
    with running_devbox(
        running_app.url, engine, REPO, config, home, env, registered, size=(120, 36)
    ) as ctx:
        yield ctx


def press(value: str, choice: int, member: str) -> str:
    payload = copy.deepcopy(fixture_json("slack/block_actions.button_in_thread.json"))
    payload["actions"][0].update(action_id=f"{ANSWER_ACTION_PREFIX}{choice}", value=value)
    payload["user"]["id"] = member
    payload["container"]["channel_id"] = CHANNEL
    payload["trigger_id"] = f"{uuid.uuid4().int % 10**12}.{choice}"
    return interaction_body(payload)


def answer_jobs(app: RunningApp) -> list[Job]:
    with app.state.sessions() as session:
        return list(session.scalars(select(Job).where(Job.kind == JobKind.ANSWER)))


def stalled_message(slack: FakeSlack) -> dict[str, Any] | None:
    for message in slack.posted(CHANNEL):
        if any(
            str(e.get("action_id", "")).startswith(ANSWER_ACTION_PREFIX)
            for block in message.get("blocks") or []
            for e in block.get("elements") or []
        ):
            return message
    return None


def test_a_permission_dialog_is_answered_from_slack_and_the_tool_runs(
    running_app: RunningApp,
    fake_github: Any,
    fake_slack: tuple[FakeSlack, str],
    answering_devbox: SpawnerContext,
    model: FakeAnthropic,
    tmp_path: Path,
) -> None:
    fake, slack = fake_github[0], fake_slack[0]
    fake.grant(REPO, "Codertocat", "write")
    fake.grant(REPO, "octocat", "write")
    fake.grant(REPO, "daan", "read")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=8001), "execute")

    model.wait_for_step(0, timeout=GENEROUS)
    asked = time.monotonic()
    stalled = wait_for(lambda: running_app.events("session.stalled"), timeout=GENEROUS)
    report_timing("Write call → session.stalled at the App", time.monotonic() - asked)
    facts = wait_for(lambda: item_row(running_app).session or None, timeout=GENEROUS)
    assert stalled[0]["screen"] == "permission-prompt"
    assert stalled[0]["question"] == "Do you want to create answered.txt?"
    options = stalled[0]["options"]
    assert options[0] == "Yes" and options[-1] == "No"
    assert facts["stall_options"] == options and facts["stall_fingerprint"]

    (notice,) = wait_for(lambda: marked(fake, MarkerKind.NOTICE), timeout=GENEROUS)
    assert notice["body"].startswith("@Codertocat, the session of this work item is **waiting")
    assert "> Do you want to create answered.txt?" in notice["body"]
    assert "1. Yes" in notice["body"] and "`the-loop answer <n>`" in notice["body"]
    message = wait_for(lambda: stalled_message(slack), timeout=GENEROUS)
    buttons = [
        e
        for b in message["blocks"]
        for e in b.get("elements") or []
        if str(e.get("action_id", "")).startswith(ANSWER_ACTION_PREFIX)
    ]
    assert buttons[0]["text"]["text"] == "1. Yes" and len(buttons) == len(options)
    yes = buttons[0]["value"]

    # An option the screen does not offer, typed on GitHub: refused, nothing queued.
    deliver(running_app, "issue_comment", comment("the-loop answer 9", cid=8002), "nine")
    refusals = marked(fake, MarkerKind.REFUSAL)
    assert any("there is no option 9" in r["body"] for r in refusals)
    # A member who may only read: told so, only them; nothing queued.
    assert post_slack(running_app.url, press(yes, 1, READER), form=True).status_code == 200
    note = wait_for(lambda: [e for e in slack.ephemerals if e["user"] == READER])
    assert note[0]["text"].startswith("Not authorized")
    assert answer_jobs(running_app) == []
    assert not (Path(answering_devbox.registry.get(ITEM).checkout) / "answered.txt").exists()

    pressed = time.monotonic()
    assert post_slack(running_app.url, press(yes, 1, MEMBER), form=True).status_code == 200
    (answered,) = wait_for(lambda: running_app.events("session.answered"), timeout=GENEROUS)
    report_timing("answer pressed → pane moved (spawner's measure)", answered["seconds"])
    report_timing("Slack press → session.answered at the App", time.monotonic() - pressed)
    assert answered["moved"] is True and answered["option"] == "Yes" and answered["by"] == "octocat"
    written = model.wait_for_step(1, timeout=GENEROUS)
    assert "answered.txt" in written.turn.text
    assert (
        Path(answering_devbox.registry.get(ITEM).checkout) / "answered.txt"
    ).read_text() == "yes\n"
    wait_for(lambda: running_app.events("session.unstalled"), timeout=GENEROUS)
    wait_for(lambda: not (item_row(running_app).session or {}).get("stall"), timeout=GENEROUS)
    moved = wait_for(
        lambda: [n for n in marked(fake, MarkerKind.NOTICE) if "moved on" in n["body"]],
        timeout=GENEROUS,
    )
    assert len(moved) == 1
    ledger = [c["body"] for c in fake.issue_comments(REPO, 1) if "in Slack_" in c["body"]]
    assert [b.splitlines()[0] for b in ledger] == [
        f"the-loop answer 1 (question {stalled[0]['fingerprint'][:8]})"
    ]
    (job,) = answer_jobs(running_app)
    assert json.loads(json.dumps(job.payload))["choice"] == 1
    model.assert_script_done()
