"""An approval gate with the real `claude` binary, driven offline by the scripted model.

The App against the fake GitHub, the devbox spawner (real tmux, real git, the product's stop
gate) against the App, Claude Code against tests/fakes/anthropic.py — the setting of
test_loop_e2e (its `claude_devbox`). The execute ticks `approve-design`: the model writes design.md and runs
`the-loop phase next`, which moves it to `approve-design` and tells it to end its turn; asked
again, `phase next` is refused; its turn ends there (the stop gate waits on a human rather
than blocking). `the-loop changes use sqlite` reaches the model as its next instruction with
the pointer back at design; it rewrites design.md and waits again; `the-loop approve` reaches
it and `phase next` goes on to implementation.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from app.gate.markers import MarkerKind
from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS
from tests.devbox_support import claude_operator_yaml, write_doc
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, bash, contains, tool_result_for
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
EXECUTE = (
    "the-loop execute\n- [ ] requirements-definition\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n- [x] approve-design\n"
)


def doc(title: str, name: str) -> str:
    return write_doc(FOLDER, title, name)


def the_script() -> list[Step]:
    """What the scripted model does, step by step (matched on the last user turn)."""
    return [
        Step(
            contains("Work on the GitHub issue", "approve-design"),
            Reply(
                "Writing the design.",
                (
                    bash(
                        f"mkdir -p {FOLDER} && {doc('Design', 'design.md')} && the-loop phase next"
                    ),
                ),
            ),
            name="design",
        ),
        Step(
            tool_result_for("Bash", "Moved from design to approve-design"),
            Reply("Trying to go on anyway.", (bash("the-loop phase next"),)),
            name="tries to pass the gate",
        ),
        Step(
            tool_result_for("Bash", "approve-design waits for a human decision"),
            Reply("The design waits for approval; ending my turn."),
            name="waits at the gate",
        ),
        Step(
            contains("use sqlite", "back at `design`"),
            Reply(
                "Reworking the design around sqlite.",
                (bash(f"{doc('Design on sqlite', 'design.md')} && the-loop phase next"),),
            ),
            name="changes",
        ),
        Step(
            tool_result_for("Bash", "Moved from design to approve-design"),
            Reply("Waiting for approval again."),
            name="waits again",
        ),
        Step(
            contains("approved `design` at `approve-design`", "go on to `implementation`"),
            Reply("Going on.", (bash("the-loop phase next"),)),
            name="approved",
        ),
        Step(
            tool_result_for("Bash", "Moved from approve-design to implementation"),
            Reply("At implementation."),
            name="implementation",
        ),
    ]


MODEL_SCRIPT = the_script
OPERATOR_YAML = claude_operator_yaml


def test_a_real_session_stops_for_approval_after_the_design(
    running_app: Any,
    fake_github: Any,
    claude_devbox: SpawnerContext,
    model: FakeAnthropic,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=7101), "execute")
    assert item_row(running_app).phase == "design"

    def step(name: str) -> Any:
        index = next(i for i, s in enumerate(the_script()) if s.name == name)
        try:
            return model.wait_for_step(index, timeout=GENEROUS)
        except AssertionError:
            record = claude_devbox.registry.get(ITEM)
            screen = claude_devbox.runner.capture(record.tmux_session) if record else "(no session)"
            raise AssertionError(
                f"step {name!r} not reached\n{model.describe()}\n{screen}"
            ) from None

    first = step("design")
    assert "At `approve-design` a human reads the phase's artifact" in first.turn.text
    told = step("tries to pass the gate")
    assert "end your turn now and wait" in told.turn.text
    step("waits at the gate")
    record = wait_for(lambda: claude_devbox.registry.get(ITEM), timeout=GENEROUS)
    checkout = Path(record.checkout)
    assert item_row(running_app).phase == "approve-design"
    assert state_node(checkout, SPEC) == "approve-design"
    (notice,) = wait_for(lambda: marked(fake, MarkerKind.REVIEW), timeout=GENEROUS)
    assert "`design` waits for approval" in notice["body"]
    assert f"- **Read:** [`{FOLDER}/design.md`](" in notice["body"]
    wait_for(lambda: "`approve-design` | waiting on a human" in progress_of(fake), timeout=GENEROUS)
    assert not (item_row(running_app).session or {}).get("gate")  # the stop gate never blocked

    deliver(running_app, "issue_comment", comment("the-loop changes use sqlite", cid=7102), "c")
    changed = step("changes")
    assert "use sqlite" in changed.turn.text
    step("waits again")
    wait_for(lambda: len(marked(fake, MarkerKind.REVIEW)) == 2, timeout=GENEROUS)
    assert "sqlite" in (checkout / FOLDER / "design.md").read_text().lower()

    deliver(running_app, "issue_comment", comment("the-loop approve", cid=7103), "approve")
    step("approved")
    step("implementation")
    wait_for(lambda: item_row(running_app).phase == "implementation", timeout=GENEROUS)
    assert state_node(checkout, SPEC) == "implementation"
    assert [(m["from"], m["to"]) for m in running_app.events("workitem.phase")] == [
        ("design", "approve-design"),
        ("approve-design", "design"),
        ("design", "approve-design"),
        ("approve-design", "implementation"),
    ]
    model.assert_script_done()
