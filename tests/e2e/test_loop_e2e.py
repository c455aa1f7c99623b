"""The whole loop with the real `claude` binary, driven offline by the scripted model.

The App (signed webhooks, gate, inbox worker, spawner API, progress publisher) against the
fake GitHub; the devbox spawner (real tmux, real git, the product's trust pre-seed and stop
gate) against the App; Claude Code against tests/fakes/anthropic.py. Label → checklist →
execute → session; the model writes requirements.md and runs `the-loop phase next` through
Bash; it tries to end its turn at design without design.md and the stop gate blocks; the
next request carries the gate's reason; it writes design.md and walks on to review; a human
follow-up reaches it; an authorized approve is delivered; `phase next` completes the item.
At each step the assertions read the fake GitHub, the events, the App's record and the
checkout's state file.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from app.gate.markers import MarkerKind
from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from tests.claude_support import (
    GENEROUS,
)
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
ROOT = Path(__file__).resolve().parents[2]
SPEC = "issue-1"
FOLDER = f"docs/specs/{SPEC}"


def doc(title: str, name: str) -> str:
    return write_doc(FOLDER, title, name)


EXECUTE = "the-loop execute\n- [ ] test-planning\n- [ ] tasks-breakdown\n"


def the_script() -> list[Step]:
    """What the scripted model does, step by step (matched on the last user turn)."""
    return [
        Step(
            contains("Work on the GitHub issue", "the-loop phase next"),
            Reply(
                "Writing the requirements.",
                (
                    bash(
                        f"mkdir -p {FOLDER} && {doc('Requirements', 'requirements.md')}"
                        " && the-loop phase next"
                    ),
                ),
            ),
            name="requirements",
        ),
        Step(
            tool_result_for("Bash", "Moved from requirements-definition to design"),
            Reply("Requirements are written; I will stop here."),
            name="tries to stop at design",
        ),
        Step(
            contains("design step is not complete", f"{FOLDER}/design.md"),
            Reply(
                "The gate wants the design.",
                (bash(f"{doc('Design', 'design.md')} && the-loop phase next"),),
            ),
            name="design after the gate",
        ),
        Step(
            tool_result_for("Bash", "Moved from design to implementation"),
            Reply("Implemented.", (bash("the-loop phase next"),)),
            name="implementation",
        ),
        Step(
            tool_result_for("Bash", "Moved from implementation to verification"),
            Reply(
                "Verified.",
                (bash(f"{doc('Verified', 'verification.md')} && the-loop phase next"),),
            ),
            name="verification",
        ),
        Step(
            tool_result_for("Bash", "Moved from verification to review"),
            Reply("Ready for review; waiting for the decision."),
            name="waits at review",
        ),
        Step(
            contains("please also mention the README"),
            Reply("Noted: I will mention the README."),
            name="follow-up",
        ),
        Step(
            contains("approved the review", "the-loop phase next"),
            Reply("Completing.", (bash("the-loop phase next"),)),
            name="complete",
        ),
        Step(
            tool_result_for("Bash", "The work item is complete."),
            Reply("Done."),
            name="done",
        ),
    ]


MODEL_SCRIPT = the_script


OPERATOR_YAML = claude_operator_yaml


def test_a_real_session_walks_from_execute_to_complete(
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
    assert marked(fake, MarkerKind.CHECKLIST)
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=7001), "execute")
    assert item_row(running_app).phase == "requirements-definition"

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

    first = step("requirements")
    assert "the-loop phase next" in first.turn.text and "stop gate" in first.turn.text
    record = wait_for(lambda: claude_devbox.registry.get(ITEM), timeout=GENEROUS)
    checkout = Path(record.checkout)

    # The model tried to end its turn at design: the stop gate blocked, and said why.
    blocked = step("design after the gate")
    assert "the design step is not complete" in blocked.turn.text
    assert f"required artifact is missing ({FOLDER}/design.md)" in blocked.turn.text
    assert "(attempt 1/" in blocked.turn.text
    # The attempt was counted by the App, not in the session's own (writable) home.
    counted = (item_row(running_app).session or {}).get("gate") or {}
    assert (counted.get("node"), counted.get("attempts")) == ("design", 1)
    assert not list(claude_devbox.state_dir.parent.glob("**/stop-gate/**/*.json"))  # homes included
    moves = running_app.events("workitem.phase")
    assert [(m["from"], m["to"]) for m in moves][:1] == [("requirements-definition", "design")]

    step("waits at review")
    wait_for(lambda: item_row(running_app).phase == "review", timeout=GENEROUS)
    assert state_node(checkout, SPEC) == "review"
    (review,) = wait_for(lambda: marked(fake, MarkerKind.REVIEW), timeout=GENEROUS)
    assert f"`{FOLDER}/design.md`" in review["body"]
    wait_for(lambda: "waiting on a human" in progress_of(fake), timeout=GENEROUS)
    assert "**Session:** running" in progress_of(fake)
    assert [(m["from"], m["to"]) for m in running_app.events("workitem.phase")] == [
        ("requirements-definition", "design"),
        ("design", "implementation"),
        ("implementation", "verification"),
        ("verification", "review"),
    ]

    deliver(running_app, "issue_comment", comment("please also mention the README", cid=7002), "f")
    followed = step("follow-up")
    assert "Follow-up from @Codertocat on GitHub" in followed.turn.text

    deliver(running_app, "issue_comment", comment("the-loop approve", cid=7003), "approve")
    approved = step("complete")
    assert "@Codertocat approved the review" in approved.turn.text
    step("done")
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.DONE, timeout=GENEROUS)
    assert state_node(checkout, SPEC) == "complete"
    wait_for(lambda: "**Done.**" in progress_of(fake), timeout=GENEROUS)
    assert len(marked(fake, MarkerKind.PROGRESS)) == 1
    model.assert_script_done()
