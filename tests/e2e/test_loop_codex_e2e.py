"""The whole loop on Codex CLI: the real `codex` binary, driven offline by a scripted
Responses API model, through the spawner's model gateway and sandbox.

The operator declares claude and codex, so the checklist offers harness rows; the execute
comment ticks `harness-codex`. The spawner launches codex in tmux with its own CODEX_HOME
(the adapter's config.toml), pastes the first message; the model runs `the-loop phase next`
through `exec_command`; it tries to end its turn at design without design.md and the stop
gate blocks with Codex's own hook; it writes design.md and walks to review; a follow-up is
pasted; the session dies and the next comment resumes it (`codex resume --last`) with its
history; an approve completes the item. The assertions read what the model was shown, the
fake GitHub, the events and the App's record.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config.operator_config import parse_config
from app.gate.markers import MarkerKind
from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from app.workitems.spend.usage import usage_of
from tests.claude_support import GENEROUS, claude_binary
from tests.codex_support import DUMMY_OPENAI_KEY, codex_binary, codex_upstream_env
from tests.devbox_support import running_devbox, scripted_env
from tests.fakes.responses_api import FakeResponses, Reply, Step, contains, exec_command
from tests.fakes.responses_api import tool_result_for as result_of
from tests.gate_support import (
    ITEM,
    REPO,
    comment,
    deliver,
    item_row,
    labeled,
    marked,
    progress_of,
    state_node,
)
from tests.spawner_support import bare_repository
from tests.support import wait_for

pytestmark = [
    pytest.mark.claude,
    pytest.mark.admin_token,
    pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True),
]
SPEC = "issue-1"
FOLDER = f"docs/specs/{SPEC}"


def doc(title: str, name: str) -> str:
    """The shell command that writes an artifact that counts: a heading and a paragraph."""
    text = f"# {title}\\n\\n{title} written down in a paragraph of plain words.\\n"
    return f"printf '{text}' > {FOLDER}/{name}"


EXECUTE = "the-loop execute\n- [x] harness-codex\n- [ ] test-planning\n- [ ] tasks-breakdown\n"
TOOL = "exec_command"
MODEL_ID = "scripted-model"


def the_script() -> list[Step]:
    """What the scripted model does, step by step (matched on what it was shown last)."""
    return [
        Step(
            contains("Work on the GitHub issue", "the-loop phase next"),
            Reply(
                "Writing the requirements.",
                (
                    exec_command(
                        f"mkdir -p {FOLDER} && {doc('Requirements', 'requirements.md')}"
                        " && the-loop phase next"
                    ),
                ),
            ),
            name="requirements",
        ),
        Step(
            result_of(TOOL, "Moved from requirements-definition to design"),
            Reply("Requirements are written; I will stop here."),
            name="tries to stop at design",
        ),
        Step(
            contains("design step is not complete", f"{FOLDER}/design.md"),
            Reply(
                "The gate wants the design.",
                (exec_command(f"{doc('Design', 'design.md')} && the-loop phase next"),),
            ),
            name="design after the gate",
        ),
        Step(
            result_of(TOOL, "Moved from design to implementation"),
            Reply("Implemented.", (exec_command("the-loop phase next"),)),
            name="implementation",
        ),
        Step(
            result_of(TOOL, "Moved from implementation to verification"),
            Reply(
                "Verified.",
                (exec_command(f"{doc('Verified', 'verification.md')} && the-loop phase next"),),
            ),
            name="verification",
        ),
        Step(
            result_of(TOOL, "Moved from verification to review"),
            Reply("Ready for review; waiting for the decision."),
            name="waits at review",
        ),
        Step(
            contains("please also mention the README"),
            Reply("Noted: I will mention the README."),
            name="follow-up",
        ),
        Step(
            contains("asked again after the crash"),
            Reply("Back, with the history."),
            name="resumed",
        ),
        Step(
            contains("approved the review", "the-loop phase next"),
            Reply("Completing.", (exec_command("the-loop phase next"),)),
            name="complete",
        ),
        Step(result_of(TOOL, "The work item is complete."), Reply("Done."), name="done"),
    ]


MODEL_WIRE = FakeResponses
MODEL_SCRIPT = the_script


def operator_yaml_of(tmp_path: Path) -> str:
    return yaml.safe_dump(
        {
            "harnesses": [
                {
                    "name": "claude",
                    "default": True,
                    "command": claude_binary(),
                    "args": ["--dangerously-skip-permissions"],
                },
                {"name": "codex", "command": codex_binary()},
            ],
            "routing": {"workspace": {"root": str(tmp_path / "work")}},
        }
    )


OPERATOR_YAML = operator_yaml_of


@pytest.fixture
def codex_devbox(
    running_app: Any, operator_yaml: str, model: FakeResponses, tmp_path: Path
) -> Iterator[SpawnerContext]:
    """A spawner whose Codex sessions reach the scripted model through its model gateway."""
    home = tmp_path / "devbox-home"
    (home / ".codex").mkdir(parents=True)
    # The operator's own Codex settings: the model is carried into the session's config. An
    # id Codex does not know gets its generic tools (`exec_command`), which the script uses.
    (home / ".codex" / "config.toml").write_text(f'model = "{MODEL_ID}"\n')
    config = parse_config(yaml.safe_load(operator_yaml))
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    env = scripted_env("http://127.0.0.1:9", home, **codex_upstream_env(model.base_url))
    hosts = frozenset({"claude", "codex"})
    with running_devbox(
        running_app.url, running_app.state.engine, REPO, config, home, env, registered, hosts=hosts
    ) as ctx:
        yield ctx


def test_a_codex_session_walks_from_execute_to_complete(
    running_app: Any,
    fake_github: Any,
    codex_devbox: SpawnerContext,
    model: FakeResponses,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    (checklist,) = marked(fake, MarkerKind.CHECKLIST)
    assert "`harness-claude`" in checklist["body"] and "`harness-codex`" in checklist["body"]
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=7001), "execute")
    assert item_row(running_app).phase == "requirements-definition"

    def step(name: str) -> Any:
        index = next(i for i, s in enumerate(the_script()) if s.name == name)
        try:
            return model.wait_for_step(index, timeout=GENEROUS)
        except AssertionError:
            record = codex_devbox.registry.get(ITEM)
            screen = codex_devbox.runner.capture(record.tmux_session) if record else "(no session)"
            raise AssertionError(
                f"step {name!r} not reached\n{model.describe()}\n{screen}"
            ) from None

    first = step("requirements")
    record = wait_for(lambda: codex_devbox.registry.get(ITEM), timeout=GENEROUS)
    assert record.harness == "codex"
    # The issue is the model's first user message (after Codex's own environment context).
    users = [u for u in first.users if not u.lstrip().startswith("<environment_context>")]
    assert users[0].startswith("Work on the GitHub issue") and "stop gate" in users[0]
    assert "exec_command" in first.tool_names and first.body["model"] == MODEL_ID
    # The operator's key went upstream; the session held only its pass.
    assert {r.credential for r in model.snapshot()} == {f"Bearer {DUMMY_OPENAI_KEY}"}
    spawned = running_app.events("session.spawned")
    assert spawned and spawned[-1]["harness"] == "codex"
    checkout = Path(record.checkout)

    # The model tried to end its turn at design: Codex's Stop hook ran the gate, which blocked.
    blocked = step("design after the gate")
    assert "the design step is not complete" in blocked.turn.text
    assert f"required artifact is missing ({FOLDER}/design.md)" in blocked.turn.text
    counted = (item_row(running_app).session or {}).get("gate") or {}
    assert (counted.get("node"), counted.get("attempts")) == ("design", 1)

    step("waits at review")
    wait_for(lambda: item_row(running_app).phase == "review", timeout=GENEROUS)
    assert state_node(checkout, SPEC) == "review"
    wait_for(lambda: "waiting on a human" in progress_of(fake), timeout=GENEROUS)
    assert "harness `codex`" in progress_of(fake)

    deliver(running_app, "issue_comment", comment("please also mention the README", cid=7002), "f")
    followed = step("follow-up")
    assert "Follow-up from @Codertocat on GitHub" in followed.turn.text

    # The session dies; the next comment relaunches it with `codex resume --last` in its own
    # CODEX_HOME, and the model is shown the conversation so far.
    record = codex_devbox.registry.get(ITEM)
    codex_devbox.runner.kill(record.tmux_session, owner=ITEM)
    wait_for(lambda: running_app.events("session.exited"), timeout=GENEROUS)
    again = comment("asked again after the crash", cid=7004)
    deliver(running_app, "issue_comment", again, "again")
    resumed = step("resumed")
    (respawned,) = running_app.events("session.respawned")
    assert respawned["harness"] == "codex" and respawned["resumed"] is True
    assert "resume" in respawned["argv"] and "--last" in respawned["argv"]
    assert any("please also mention the README" in u for u in resumed.users)

    deliver(running_app, "issue_comment", comment("the-loop approve", cid=7003), "approve")
    approved = step("complete")
    assert "@Codertocat approved the review" in approved.turn.text
    step("done")
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.DONE, timeout=GENEROUS)
    assert state_node(checkout, SPEC) == "complete"
    assert not running_app.events("session.stalled")  # no blocking dialog ever showed
    # What the App counted for the item is exactly what the scripted model reported, read
    # the Messages API's way: cached input apart from the rest.
    served = [r.served for r in model.snapshot() if r.served]
    cached = [s["input_tokens_details"]["cached_tokens"] for s in served]
    want = {
        "input_tokens": sum(s["input_tokens"] for s in served) - sum(cached),
        "cache_read_input_tokens": sum(cached),
        "output_tokens": sum(s["output_tokens"] for s in served),
        "requests": len(served),
    }

    def counted() -> dict[str, int]:
        with running_app.state.sessions() as db:
            got = usage_of(db, [ITEM]).get(ITEM, {})
        return {name: got.get(name, 0) for name in want}

    assert want["requests"] and want["output_tokens"]
    wait_for(lambda: counted() == want, timeout=GENEROUS)
    model.assert_script_done()
