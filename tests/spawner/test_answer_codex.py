"""Answering Codex's command-approval screen from GitHub, with the real `codex` binary driven
offline by the scripted Responses API.

The operator runs codex with approvals on (`-c approval_policy="on-request"`, a read-only
sandbox): the model's `exec_command` asking to run unsandboxed makes Codex ask "Would you
like to run the following command?". The devbox watchdog reports the screen as a stall with
its options; an authorized `the-loop answer 1` presses Enter into the pane, the command
runs, the model is shown its output, and the stall clears.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS
from tests.codex_support import codex_binary, codex_upstream_env
from tests.devbox_support import running_devbox, scripted_env
from tests.fakes.model_script import ToolCall
from tests.fakes.responses_api import FakeResponses, Reply, Step, contains, tool_result_for
from tests.gate_support import (
    ITEM,
    REPO,
    comment,
    deliver,
    labeled,
)
from tests.spawner_support import bare_repository
from tests.support import RunningApp, wait_for

pytestmark = [
    pytest.mark.claude,
    pytest.mark.admin_token,
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
EXECUTE = (
    "the-loop execute\n- [x] harness-codex\n- [ ] requirements-definition\n- [ ] design\n"
    "- [ ] test-planning\n- [ ] tasks-breakdown\n"
)
ESCALATED = ToolCall(
    "exec_command",
    {
        "cmd": "echo yes > answered.txt && echo wrote-it",
        "sandbox_permissions": "require_escalated",
        "justification": "May I write answered.txt?",
    },
)


def the_script() -> list[Step]:
    return [
        Step(contains("Work on the GitHub issue"), Reply("Writing.", (ESCALATED,)), name="ask"),
        Step(tool_result_for("exec_command", "wrote-it"), Reply("Written."), name="written"),
    ]


MODEL_WIRE = FakeResponses
MODEL_SCRIPT = the_script


def operator_yaml_of(tmp_path: Path) -> str:
    approvals = ["-c", 'approval_policy="on-request"', "-c", 'sandbox_mode="read-only"']
    return yaml.safe_dump(
        {
            "harnesses": [
                {"name": "claude", "default": True},
                {"name": "codex", "command": codex_binary(), "args": approvals},
            ],
            "routing": {"workspace": {"root": str(tmp_path / "work")}},
        }
    )


OPERATOR_YAML = operator_yaml_of


@pytest.fixture
def codex_answering_devbox(
    running_app: RunningApp, operator_yaml: str, model: FakeResponses, tmp_path: Path
) -> Iterator[SpawnerContext]:
    home = tmp_path / "devbox-home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "scripted-model"\n')
    config = parse_config(yaml.safe_load(operator_yaml))
    env = scripted_env("http://127.0.0.1:9", home, **codex_upstream_env(model.base_url))
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    with running_devbox(
        running_app.url,
        running_app.state.engine,
        REPO,
        config,
        home,
        env,
        registered,
        hosts=frozenset({"claude", "codex"}),
    ) as ctx:
        yield ctx


def test_codex_s_approval_screen_is_a_stall_and_an_answer_runs_the_command(
    running_app: RunningApp,
    fake_github: Any,
    codex_answering_devbox: SpawnerContext,
    model: FakeResponses,
    tmp_path: Path,
) -> None:
    fake = fake_github[0]
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=8101), "execute")

    model.wait_for_step(0, timeout=GENEROUS)
    stalled = wait_for(lambda: running_app.events("session.stalled"), timeout=GENEROUS)
    assert stalled[0]["screen"] == "permission-prompt"
    assert stalled[0]["question"] == "Reason: May I write answered.txt?"
    assert stalled[0]["options"][0] == "Yes, proceed (y)"
    checkout = Path(codex_answering_devbox.registry.get(ITEM).checkout)
    assert not (checkout / "answered.txt").exists()

    deliver(running_app, "issue_comment", comment("the-loop answer 1", cid=8102), "answer")
    (answered,) = wait_for(lambda: running_app.events("session.answered"), timeout=GENEROUS)
    assert answered["moved"] is True and answered["option"] == "Yes, proceed (y)"
    written = model.wait_for_step(1, timeout=GENEROUS)
    assert "wrote-it" in written.turn.text
    assert (checkout / "answered.txt").read_text() == "yes\n"
    wait_for(lambda: running_app.events("session.unstalled"), timeout=GENEROUS)
    model.assert_script_done()
