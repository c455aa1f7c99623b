"""A pull request made by the real `codex` binary, driven offline by the scripted Responses
API: the model commits on the work branch, `git push`es through the App's git gateway and runs
`the-loop pr create`, all from `exec_command`; a review comment on a line reaches it; the
merge finishes the item and ends the session. The same bed as tests/workitems/test_pulls_claude.py."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from tests.claude_support import GENEROUS
from tests.codex_support import codex_binary, codex_upstream_env
from tests.devbox_support import running_devbox, scripted_env
from tests.fakes.github_pulls import head_sha
from tests.fakes.responses_api import (
    FakeResponses,
    Reply,
    Step,
    contains,
    exec_command,
    tool_result_for,
)
from tests.pull_support import (
    AUTHOR_ENV,
    BRANCH,
    ITEM,
    REPO,
    Bed,
    label_and_execute,
    pr_payload,
)
from tests.pull_support import CONFIG as BED_CONFIG
from tests.support import fixture_json, wait_for

# The bed's App config with both harnesses declared, so the checklist offers `harness-codex`.
CONFIG = "harnesses: [{name: claude, default: true}, {name: codex}]\n" + BED_CONFIG
pytestmark = [
    pytest.mark.claude,
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
    pytest.mark.parametrize("pull_config", [CONFIG], indirect=True),
]
STRAIGHT_TO_CODE = (
    "the-loop execute\n- [x] harness-codex\n- [ ] requirements-definition\n- [ ] design\n"
    "- [ ] test-planning\n- [ ] tasks-breakdown\n"
)
PUSH_AND_OPEN = (
    "echo fixed > fix.txt && git add fix.txt && git commit -q -m 'Fix the README'"
    " && git push 2>&1 && the-loop pr create --title 'Fix the README' --body 'Fixes it.'"
)
TOOL = "exec_command"


def the_script() -> list[Step]:
    return [
        Step(
            contains("Work on the GitHub issue", BRANCH, "the-loop pr create"),
            Reply("Fixing it on the work branch.", (exec_command(PUSH_AND_OPEN),)),
            name="push and open",
        ),
        Step(
            tool_result_for(TOOL, "/pull/"),
            Reply("The pull request is open; waiting for review."),
            name="opened",
        ),
        Step(
            contains("Review comment on pull request", "`README.md` line 3"),
            Reply("Noted the review."),
            name="review",
        ),
    ]


MODEL_WIRE = FakeResponses
MODEL_SCRIPT = the_script


@pytest.fixture
def codex_pull_devbox(bed: Bed, model: FakeResponses, tmp_path: Path) -> Iterator[SpawnerContext]:
    home = tmp_path / "devbox-home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "scripted-model"\n')
    env = scripted_env(
        "http://127.0.0.1:9",
        home,
        GIT_CONFIG_NOSYSTEM="1",
        **AUTHOR_ENV,
        **codex_upstream_env(model.base_url),
    )
    config = parse_config(
        {
            "harnesses": [
                {"name": "claude", "default": True},
                {"name": "codex", "command": codex_binary()},
            ],
            "routing": {"workspace": {"root": str(tmp_path / "work")}},
        }
    )
    registered = lambda: bed.events("spawner.registered")  # noqa: E731
    with running_devbox(
        bed.app.url,
        bed.app.state.engine,
        REPO,
        config,
        home,
        env,
        registered,
        hosts=frozenset({"claude", "codex"}),
    ) as ctx:
        yield ctx


def screen(ctx: SpawnerContext) -> str:
    record = ctx.registry.get(ITEM)
    return ctx.runner.capture(record.tmux_session, history=200) if record else "(no session)"


def wait_step(model: FakeResponses, ctx: SpawnerContext, name: str) -> Any:
    index = next(i for i, s in enumerate(the_script()) if s.name == name)
    try:
        return model.wait_for_step(index, timeout=GENEROUS)
    except AssertionError:
        raise AssertionError(
            f"step {name!r} not reached\n{model.describe()}\n{screen(ctx)}"
        ) from None


def wait_turn_end(ctx: SpawnerContext, answer: str) -> None:
    """Until `answer` shows with Codex's end-of-turn line ("Worked for …") under it."""
    pattern = re.compile(re.escape(answer) + r".*?\n\s*Worked for ", re.DOTALL)
    wait_for(lambda: pattern.search(screen(ctx)), timeout=GENEROUS)


def test_a_codex_session_pushes_opens_its_pr_hears_a_review_and_the_merge_ends_it(
    bed: Bed, codex_pull_devbox: SpawnerContext, model: FakeResponses
) -> None:
    label_and_execute(bed, STRAIGHT_TO_CODE)
    first = wait_step(model, codex_pull_devbox, "push and open")
    assert "the-loop pr create" in first.turn.text and f"`{BRANCH}`" in first.turn.text
    opened = wait_step(model, codex_pull_devbox, "opened")
    (pr,) = bed.fake.pull_requests(REPO)
    assert pr["html_url"] in opened.turn.text
    assert pr["head"]["ref"] == BRANCH and "Closes #1" in pr["body"]
    sha = head_sha(bed.fake.git_root, REPO, BRANCH)
    assert sha is not None and pr["head"]["sha"] == sha and bed.git.pushes == 1
    assert bed.item().pull_number == pr["number"]
    wait_turn_end(codex_pull_devbox, "waiting for review.")

    review = copy.deepcopy(fixture_json("github/pull_request_review_comment.created.json"))
    review["pull_request"]["number"] = pr["number"]
    review["comment"].update(id=830_000_100, line=3)
    review["comment"]["body"] = "Say hello to the whole world here."
    bed.send("pull_request_review_comment", review)
    seen = wait_step(model, codex_pull_devbox, "review")
    assert "`README.md` line 3:" in seen.turn.text

    merged = pr_payload("pull_request.closed.json", pr["number"], sha=sha)
    merged["pull_request"]["merged"] = True
    bed.send("pull_request", merged)
    assert bed.item().state == WorkItemStatus.DONE
    wait_for(lambda: bed.events("session.stopped"), timeout=GENEROUS)
    wait_for(
        lambda: (
            not codex_pull_devbox.runner.exists(codex_pull_devbox.registry.get(ITEM).tmux_session)
        )
    )
    model.assert_script_done()
