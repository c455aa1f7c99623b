"""Pull-request sessions: the trigger label on a pull request the App did not open makes the PR
a work item — checklist on the PR, execute there, a session checked out on the PR's own head
branch (launched by the same argv rules), follow-ups from the PR. A fork's PR gets one reply
and no session. Real App, git over HTTP, tmux and spawner code; fake GitHub."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

from app.gate.markers import MarkerKind, is_marked
from app.store.tables import JobKind, WorkItemStatus
from tests.gate_support import TRIGGER, comment
from tests.pull_support import (
    BRANCH,
    REPO,
    agent,
    data_json,
    pr_payload,
    run_next_job,
    running,
    session_env,
    spawner_context,
)
from tests.spawner_support import git
from tests.support import fixture_json

PULL_ITEM = f"github:{REPO}#2"
IDS = itertools.count(820_000_001)


def labelled_pull(bed, head_repo: str = REPO, number: int = 2, head: str = "changes") -> dict:
    payload = data_json("pull_request.labeled.json")
    payload["label"]["name"] = TRIGGER
    payload["repository"]["clone_url"] = bed.clone_url()
    pr = payload["pull_request"]
    pr["number"] = payload["number"] = number
    pr["head"]["ref"] = head
    pr["head"]["repo"]["full_name"] = head_repo
    return payload


def on_the_pull(body: str, number: int = 2, login: str = "Codertocat") -> dict[str, Any]:
    payload = comment(body, login=login, cid=next(IDS))
    payload["issue"]["number"] = number
    payload["issue"]["html_url"] = f"https://github.com/{REPO}/pull/{number}"
    payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/2"}
    pull = data_json("pull_request.labeled.json")["pull_request"]  # a PR's comment shows the PR
    payload["issue"].update(title=pull["title"], body=pull["body"])
    return payload


def push_branch(bed, branch: str) -> str:
    """Someone's branch on the repository, one commit ahead of main."""
    work = bed.tmp / f"someone-{branch}"
    origin = Path(bed.fake.git_root) / f"{REPO}.git"
    git("clone", "-q", str(origin), str(work), cwd=bed.tmp)
    git("switch", "-q", "-c", branch, cwd=work)
    (work / "CHANGES.md").write_text("a change\n")
    git("add", "CHANGES.md", cwd=work)
    git("commit", "-q", "-m", "a change", cwd=work)
    git("push", "-q", "origin", branch, cwd=work)
    return git("rev-parse", "HEAD", cwd=work).strip()


def test_a_labelled_pull_request_gets_its_own_session_on_its_head_branch(
    bed, session_runner, standin
):
    head = push_branch(bed, "changes")
    bed.send("pull_request", labelled_pull(bed))
    item = bed.item(PULL_ITEM)
    assert item.state == WorkItemStatus.PARKED and item.branch == "changes"
    assert item.pull_number == 2 and item.pull_request["by"] == "labelled"
    checklists = [
        c for c in bed.fake.issue_comments(REPO, 2) if is_marked(c["body"], MarkerKind.CHECKLIST)
    ]
    assert len(checklists) == 1

    bed.send("issue_comment", on_the_pull("the-loop execute"))
    (spawn,) = bed.jobs(JobKind.SPAWN, PULL_ITEM)
    assert spawn.payload["branch"] == "changes"
    prompt = spawn.payload["prompt"]
    assert prompt.startswith(f"Work on the GitHub pull request https://github.com/{REPO}/pull/2")
    assert "This is pull request #2" in prompt and "the-loop pr create" not in prompt

    spawner = bed.spawner()
    ctx = spawner_context(bed, session_runner, standin, args=["--dangerously-skip-permissions"])
    started = run_next_job(bed, spawner, ctx)
    checkout = Path(started["result"]["checkout"])
    argv = standin.wait_start(PULL_ITEM)["argv"]
    assert "--dangerously-skip-permissions" in argv and "--disallowedTools=AskUserQuestion" in argv
    env = session_env(standin, PULL_ITEM)
    upstream = agent(env, checkout, "git", "rev-parse", "--abbrev-ref", "@{upstream}")
    assert upstream.stdout.strip() == "origin/changes"
    assert agent(env, checkout, "git", "rev-parse", "HEAD").stdout.strip() == head

    (checkout / "more.txt").write_text("more\n")
    agent(env, checkout, "git", "add", "more.txt")
    agent(env, checkout, "git", "commit", "-q", "-m", "more")
    pushed = agent(env, checkout, "git", "push")
    assert pushed.returncode == 0, pushed.stderr
    shown = agent(env, checkout, "the-loop", "pr")
    assert "Pull request #2 (open)" in shown.stdout
    again = agent(env, checkout, "the-loop", "pr", "create", "--title", "t", "--body", "b")
    assert again.returncode == 1 and "already open" in again.stderr

    review = fixture_json("github/pull_request_review_comment.created.json")
    bed.send("pull_request_review_comment", review)
    bed.send("issue_comment", on_the_pull("Looks close; rename the file."))
    bodies = [job.payload["body"] for job in bed.jobs(JobKind.DELIVER, PULL_ITEM)]
    assert "Maybe you should use more emoji on this line." in bodies[0]
    assert bodies[1] == "Looks close; rename the file."


def test_a_pull_request_from_a_fork_gets_one_reply_and_no_session(bed):
    payload = labelled_pull(bed, head_repo="someone/Hello-World")
    bed.send("pull_request", payload)
    again = copy.deepcopy(payload)  # labelled again (a new event, so a new body)
    again["pull_request"]["updated_at"] = "2026-12-01T00:00:00Z"
    bed.send("pull_request", again)
    replies = [
        c for c in bed.fake.issue_comments(REPO, 2) if is_marked(c["body"], "notice", event="fork")
    ]
    assert len(replies) == 1
    assert "`someone/Hello-World`, a fork" in replies[0]["body"]
    assert "no session is started" in replies[0]["body"]
    assert [e["reason"] for e in bed.events("workitem.ignored")] == ["fork", "fork"]
    assert bed.events("workitem.created") == []
    bed.send("issue_comment", on_the_pull("the-loop execute"))
    assert bed.jobs(JobKind.SPAWN, PULL_ITEM) == []


def test_the_label_on_a_work_items_own_pull_request_starts_nothing(bed):
    running(bed)
    bed.send("pull_request", pr_payload("pull_request.opened.json", 7, branch=BRANCH))
    bed.send("pull_request", labelled_pull(bed, number=7, head=BRANCH))
    (ignored,) = bed.events("workitem.label_ignored")
    assert ignored["reason"] == f"the pull request of github:{REPO}#1"
    assert len(bed.events("workitem.created")) == 1  # the issue's item, no second


def test_a_labelled_pull_request_closed_before_execute_closes_its_item(bed):
    bed.send("pull_request", labelled_pull(bed))
    closed = pr_payload("pull_request.closed.json", 2, branch="changes")
    bed.send("pull_request", closed)
    assert bed.item(PULL_ITEM).state == WorkItemStatus.CLOSED
