"""A base branch named on the execute line (`the-loop execute base:release/2.4`): the session's
work branch is cut from it, its pull request targets it, the git gateway still lets only the
work branch through; and a base GitHub does not have is refused with one comment before
anything is frozen or queued.

Real App, database, tmux, git, git-over-HTTP and spawner code; fake GitHub and Slack; the
session's harness is a stand-in (see test_pulls_flow).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.gate.markers import MarkerKind, is_marked
from app.spawner.session.tmux import TmuxRunner
from app.store.tables import JobKind, WorkItemStatus
from tests.fakes.github_pulls import head_sha
from tests.gate_support import checklist_comments, comment, labeled
from tests.pull_support import (
    BRANCH,
    REPO,
    Bed,
    agent,
    commit_and_push,
    label_and_execute,
    run_next_job,
    session_env,
    spawner_context,
)
from tests.spawner_support import StandIn, git

BASE = "release/2.4"


def release_branch(bed: Bed) -> str:
    """`release/2.4` in the git server's copy of the repository, one commit past `main`;
    returns its commit."""
    src = bed.fake.git_root / f"{REPO}-src"
    git("switch", "-q", "-c", BASE, cwd=src)
    (src / "RELEASE").write_text("2.4\n")
    git("add", "RELEASE", cwd=src)
    git("commit", "-q", "-m", "release 2.4", cwd=src)
    git("push", "-q", str(bed.fake.git_root / f"{REPO}.git"), BASE, cwd=src)
    sha = head_sha(bed.fake.git_root, REPO, BASE)
    assert sha is not None
    return sha


def execute(bed: Bed, text: str) -> None:
    """Another execute reply on the labelled issue."""
    bed.send("issue_comment", comment(text, cid=int(uuid.uuid4().int % 10**9)))


def refusals(bed: Bed) -> list[dict[str, Any]]:
    return [c for c in bed.fake.issue_comments(REPO, 1) if is_marked(c["body"], MarkerKind.REFUSAL)]


def test_an_execute_naming_a_base_branch_works_from_it_and_its_pull_request_targets_it(
    bed: Bed, session_runner: TmuxRunner, standin: StandIn
) -> None:
    base_sha = release_branch(bed)
    label_and_execute(bed, f"the-loop execute base:{BASE}")
    (spawn,) = bed.jobs(JobKind.SPAWN)
    assert spawn.payload["frozen"]["base"] == BASE and spawn.payload["branch"] == BRANCH
    assert bed.item().frozen["base"] == BASE

    spawner = bed.spawner()
    spawned = run_next_job(bed, spawner, spawner_context(bed, session_runner, standin))
    live = SimpleNamespace(
        bed=bed, env=session_env(standin), checkout=Path(spawned["result"]["checkout"])
    )
    # The work branch starts at the base's tip, with the base's files.
    shown = agent(live.env, live.checkout, "git", "branch", "--show-current").stdout.strip()
    assert shown == BRANCH
    assert agent(live.env, live.checkout, "git", "rev-parse", "HEAD").stdout.strip() == base_sha
    assert (live.checkout / "RELEASE").read_text() == "2.4\n"

    sha = commit_and_push(live)
    assert head_sha(bed.fake.git_root, REPO, BRANCH) == sha
    # The gateway lets only the work branch through: a push to the base is refused.
    refused = agent(live.env, live.checkout, "git", "push", "origin", f"HEAD:refs/heads/{BASE}")
    assert refused.returncode != 0
    assert head_sha(bed.fake.git_root, REPO, BASE) == base_sha

    (live.checkout / "pr.md").write_text("Fixes the release.\n")
    created = agent(
        live.env,
        live.checkout,
        *("the-loop", "pr", "create", "--title", "Fix 2.4", "--body-file", "pr.md"),
    )
    assert created.returncode == 0, created.stderr
    (pr,) = bed.fake.pull_requests(REPO)
    assert pr["base"]["ref"] == BASE and pr["head"]["ref"] == BRANCH
    assert f"→ {BASE}" in agent(live.env, live.checkout, "the-loop", "pr").stdout
    assert refusals(bed) == []


def test_a_base_branch_that_does_not_exist_is_refused_with_one_comment_and_nothing_launches(
    bed: Bed,
) -> None:
    label_and_execute(bed, "the-loop execute base:release/9.9")
    (refusal,) = refusals(bed)
    assert "the branch `release/9.9` does not exist" in refusal["body"]
    assert bed.jobs(JobKind.SPAWN) == []
    item = bed.item()
    assert item.frozen is None and item.state == WorkItemStatus.PARKED
    (event,) = bed.events("gate.refused")
    assert event["reason"] == "no-such-base"

    # A name git would not take is refused too, without being echoed back.
    execute(bed, "the-loop execute base:a..b")
    assert len(refusals(bed)) == 2 and "a..b" not in refusals(bed)[-1]["body"]
    assert bed.jobs(JobKind.SPAWN) == []

    # The same execute once the branch exists goes ahead on it.
    release_branch(bed)
    execute(bed, f"the-loop execute base:{BASE}")
    (spawn,) = bed.jobs(JobKind.SPAWN)
    assert spawn.payload["frozen"]["base"] == BASE
    assert len(refusals(bed)) == 2


def test_an_issue_that_names_its_base_is_worked_from_it_and_the_checklist_says_so(
    bed: Bed,
) -> None:
    """A `base:` line in the issue's text: the checklist says which base will be used, a bare
    execute freezes it, and the confirmation names it; a reply's `base:` word still wins."""
    release_branch(bed)
    text = "The release needs the fix.\n\nbase: release/2.4\n"
    payload = labeled()
    payload["repository"] = {**payload["repository"], "clone_url": bed.clone_url()}
    payload["issue"] = {**payload["issue"], "body": text}
    bed.fake.add_issue(REPO, payload["issue"])
    bed.send("issues", payload)
    (checklist,) = checklist_comments(bed.fake)
    assert f"**Base branch** · `{BASE}`, named by the issue's `base:` line" in checklist["body"]

    reply = comment("the-loop execute", cid=int(uuid.uuid4().int % 10**9))
    reply["issue"] = {**reply["issue"], "body": text}
    bed.send("issue_comment", reply)
    (spawn,) = bed.jobs(JobKind.SPAWN)
    assert spawn.payload["frozen"]["base"] == BASE
    owed = bed.item().confirmation_owed or ""
    assert f"- **Base branch:** `{BASE}`" in owed or any(
        f"- **Base branch:** `{BASE}`" in c["body"] for c in bed.fake.issue_comments(REPO, 1)
    )
    assert refusals(bed) == []


def test_a_base_the_issue_names_that_does_not_exist_is_refused_before_anything_queues(
    bed: Bed,
) -> None:
    text = "Work on the old line.\n\nbase: release/9.9\n"
    payload = labeled()
    payload["issue"] = {**payload["issue"], "body": text}
    bed.fake.add_issue(REPO, payload["issue"])
    bed.send("issues", payload)
    reply = comment("the-loop execute", cid=int(uuid.uuid4().int % 10**9))
    reply["issue"] = {**reply["issue"], "body": text}
    bed.send("issue_comment", reply)
    (refusal,) = refusals(bed)
    assert "the branch `release/9.9` does not exist" in refusal["body"]
    assert bed.jobs(JobKind.SPAWN) == [] and bed.item().frozen is None
