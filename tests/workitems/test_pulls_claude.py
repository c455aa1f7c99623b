"""A pull request made by the real `claude` binary, driven offline by the scripted model.

The App and the fake GitHub; a git-over-HTTP server that accepts only the tokens the fake
GitHub minted (`contents: write` to push); the devbox spawner (its agent loop, real tmux and
git) launching real Claude Code against tests/fakes/anthropic.py. The model commits on the
work branch, `git push`es — to the App's git gateway, with the session token the checkout's
credential helper gives, and the App on to the git server — and runs `the-loop pr create`; the fake GitHub gets the PR with "Closes #1". A review
comment on a line reaches the model with its path, line and words; a failing check run with
its name; the merge finishes the item and ends the session. The time from a review comment's
webhook to the model seeing it is printed in the run's summary (measured, not asserted).
"""

from __future__ import annotations

import copy
import re
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from tests.claude_support import (
    GENEROUS,
    report_timing,
)
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, bash, contains, tool_result_for
from tests.fakes.github_pulls import head_sha
from tests.pull_support import (
    BRANCH,
    ITEM,
    REPO,
    STRAIGHT_TO_CODE,
    Bed,
    data_json,
    label_and_execute,
    pr_payload,
)
from tests.support import fixture_json, wait_for, with_installation

pytestmark = [
    pytest.mark.claude,
    pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True),
]
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = 3  # review comments timed from webhook to the model's request
# The session goes straight to implementation, where the stop gate lets a turn end: this test is
# about the pull request, not the spec phases before it.
PUSH_AND_OPEN = (
    "echo fixed > fix.txt && git add fix.txt && git commit -q -m 'Fix the README'"
    " && git push 2>&1 && the-loop pr create --title 'Fix the README' --body 'Fixes it.'"
)


def the_script() -> list[Step]:
    steps = [
        Step(
            contains("Work on the GitHub issue", BRANCH, "the-loop pr create"),
            Reply("Fixing it on the work branch.", (bash(PUSH_AND_OPEN),)),
            name="push and open",
        ),
        Step(
            tool_result_for("Bash", "/pull/"),
            Reply("The pull request is open; waiting for review."),
            name="opened",
        ),
    ]
    steps += [
        Step(
            contains("Review comment on pull request", "`README.md` line 3", f"sample {k}"),
            Reply(f"Noted review sample {k}."),
            name=f"review {k}",
        )
        for k in range(SAMPLES)
    ]
    steps.append(
        Step(
            contains("Checks failed on pull request", "Octocoders-linter", "E501 in fix.txt"),
            Reply("Fixing what the linter says."),
            name="check",
        )
    )
    return steps


def step_index(name: str) -> int:
    return next(i for i, s in enumerate(the_script()) if s.name == name)


MODEL_SCRIPT = the_script


def screen(ctx: SpawnerContext) -> str:
    record = ctx.registry.get(ITEM)
    return ctx.runner.capture(record.tmux_session, history=200) if record else "(no session)"


def wait_step(model: FakeAnthropic, ctx: SpawnerContext, name: str) -> Any:
    try:
        return model.wait_for_step(step_index(name), timeout=GENEROUS)
    except AssertionError:
        raise AssertionError(
            f"step {name!r} not reached\n{model.describe()}\n{screen(ctx)}"
        ) from None


def wait_turn_end(ctx: SpawnerContext, answer: str) -> None:
    """Until `answer` is shown and the turn ended under it: a follow-up pasted while a turn
    winds down can lose its Enter (see claude_support.ClaudeSession.wait_turn_end)."""
    pattern = re.compile(re.escape(answer) + r".*?\n\s*✻ [^\n]* for \d", re.DOTALL)
    wait_for(lambda: pattern.search(screen(ctx)), timeout=GENEROUS)


def review_comment(number: int, sample: int) -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json("github/pull_request_review_comment.created.json"))
    payload["pull_request"]["number"] = number
    payload["comment"].update(id=830_000_000 + sample, line=3)
    payload["comment"]["body"] = f"Say hello to the whole world here (sample {sample})."
    return payload


def test_a_real_session_pushes_opens_its_pr_hears_reviews_and_checks_and_the_merge_ends_it(
    bed: Bed, pull_devbox: SpawnerContext, model: FakeAnthropic
) -> None:
    label_and_execute(bed, STRAIGHT_TO_CODE)
    first = wait_step(model, pull_devbox, "push and open")
    assert "the-loop pr create" in first.turn.text and f"`{BRANCH}`" in first.turn.text
    opened = wait_step(model, pull_devbox, "opened")
    (pr,) = bed.fake.pull_requests(REPO)
    assert pr["html_url"] in opened.turn.text
    assert pr["head"]["ref"] == BRANCH and pr["base"]["ref"] == "main"
    assert "Fixes it." in pr["body"] and "Closes #1" in pr["body"]
    sha = head_sha(bed.fake.git_root, REPO, BRANCH)
    assert sha is not None and pr["head"]["sha"] == sha and bed.git.pushes == 1
    minted = [t for t, m in bed.fake.tokens.items() if m["permissions"] == {"contents": "write"}]
    assert len(minted) == 1 and not any(minted[0] in t for t in bed.git.process_tables)
    assert bed.item().pull_number == pr["number"]
    wait_turn_end(pull_devbox, "waiting for review.")

    seen: list[float] = []
    for sample in range(SAMPLES):
        sent = time.monotonic()
        bed.send("pull_request_review_comment", review_comment(pr["number"], sample))
        request = wait_step(model, pull_devbox, f"review {sample}")
        seen.append(request.at - sent)
        assert "Follow-up from @Codertocat on GitHub" in request.turn.text
        assert "`README.md` line 3:" in request.turn.text and "@@ -1 +1 @@" in request.turn.text
        wait_turn_end(pull_devbox, f"Noted review sample {sample}.")
    report_timing("review comment → seen by the model, p50", statistics.median(seen))
    report_timing("review comment → seen by the model, max", max(seen))

    bed.fake.add_check_run(REPO, sha, "Octocoders-linter", "failure", "1 error", "E501 in fix.txt")
    check = with_installation(data_json("check_run.completed.failure.json"))
    check["check_run"].update(head_sha=sha, pull_requests=[{"number": pr["number"]}])
    bed.send("check_run", check)
    told = wait_step(model, pull_devbox, "check")
    assert f"head commit {sha[:12]}" in told.turn.text

    merged = pr_payload("pull_request.closed.json", pr["number"], sha=sha)
    merged["pull_request"]["merged"] = True
    bed.send("pull_request", merged)
    assert bed.item().state == WorkItemStatus.DONE
    wait_for(lambda: bed.events("session.stopped"), timeout=GENEROUS)  # stopSession: true
    wait_for(lambda: not pull_devbox.runner.exists(pull_devbox.registry.get(ITEM).tmux_session))
    assert bed.item().state == WorkItemStatus.DONE
    model.assert_script_done()
