"""A session's pull request, end to end, with the commands an agent runs: the spawner puts the
checkout on its work branch with `origin` at the App's git gateway, `git push` goes through
the App (the session's token in, the App's installation token out) to the git server, `the-loop pr create` opens the PR with "Closes #1", a review
comment and a failing check reach the session's terminal, and the merge finishes the item.

Real App, database, tmux, git, git-over-HTTP and spawner code; fake GitHub and Slack; the
session's harness is a stand-in that records its environment and what reached its terminal
(the real `claude` against a scripted model is the next step up, once that fake lands).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.audit import read_jsonl
from app.gate.markers import MarkerKind, find_marker, is_marked
from app.store.tables import JobKind, WorkItemStatus
from tests.fakes.github_pulls import head_sha
from tests.pull_support import (
    BRANCH,
    CHANNEL,
    REPO,
    agent,
    commit_and_push,
    data_json,
    pr_payload,
    run_next_job,
)
from tests.support import fixture_json, wait_for, with_installation


def notices(fake: Any, event: str) -> list[dict[str, Any]]:
    return [
        c
        for c in fake.issue_comments(REPO, 1)
        if is_marked(c["body"], MarkerKind.NOTICE, event=event)
    ]


def slack_texts(live: SimpleNamespace) -> list[str]:
    """Every message in the channel: its fallback text and its blocks."""
    return [json.dumps(m, ensure_ascii=False) for m in live.bed.slack.posted(CHANNEL)]


def open_pull(live: SimpleNamespace) -> dict[str, Any]:
    (live.checkout / "pr.md").write_text("Fixes the README.\n\n<!-- the-loop:checklist -->\n")
    created = agent(
        live.env,
        live.checkout,
        *("the-loop", "pr", "create", "--title", "Fix the README", "--body-file", "pr.md"),
    )
    assert created.returncode == 0, created.stderr
    (pr,) = live.bed.fake.pull_requests(REPO)
    assert pr["html_url"] in created.stdout
    return pr


def test_the_session_pushes_its_work_branch_through_the_app_and_opens_its_pull_request(
    live, caplog
):
    bed = live.bed
    branch = agent(live.env, live.checkout, "git", "branch", "--show-current").stdout.strip()
    assert branch == BRANCH
    (spawn,) = bed.jobs(JobKind.SPAWN)
    assert spawn.payload["branch"] == BRANCH and f"`{BRANCH}`" in spawn.payload["prompt"]
    assert "the-loop pr create" in spawn.payload["prompt"]
    assert live.env["GIT_TERMINAL_PROMPT"] == "0"

    sha = commit_and_push(live)
    assert head_sha(bed.fake.git_root, REPO, BRANCH) == sha
    (minted,) = [t for t, m in bed.fake.tokens.items() if m["permissions"] == {"contents": "write"}]
    assert bed.fake.tokens[minted]["repositories"] == ["Hello-World"]
    assert bed.git.pushes == 1
    (pushed,) = bed.events("git.pushed")
    assert pushed["refs"] == [f"refs/heads/{BRANCH}"] and pushed["status"] == 200
    # The session's origin is the App, and its push never saw GitHub's token.
    remote = agent(live.env, live.checkout, "git", "remote", "get-url", "origin").stdout.strip()
    assert remote == f"{bed.app.url}/git/{REPO}.git"

    # The token stayed in the App: not in any argv, config, file, event or log.
    assert bed.git.process_tables and not any(minted in t for t in bed.git.process_tables)
    assert minted not in str(live.env)
    files = [p for p in live.checkout.rglob("*") if p.is_file()]
    assert not [p for p in files if minted.encode() in p.read_bytes()]
    home, user_home = Path(live.env["HOME"]), bed.tmp / "home"
    assert "helper = store" in (user_home / ".gitconfig").read_text()
    # The devbox user's `store` helper never ran: the session has a home of its own.
    assert not (home / ".git-credentials").exists()
    assert not (user_home / ".git-credentials").exists()
    assert "git-credential" in (live.checkout / ".git" / "config").read_text()
    assert minted not in str(bed.app.events())
    state = Path(live.ctx.state_dir)
    assert minted not in str(read_jsonl(state / "events.jsonl"))
    assert minted not in caplog.text

    pr = open_pull(live)
    assert pr["head"]["ref"] == BRANCH and pr["base"]["ref"] == "main"
    assert pr["head"]["sha"] == sha
    body = pr["body"]
    assert "Closes #1" in body and "&lt;!-- the-loop:checklist" in body
    assert find_marker(body) is not None and find_marker(body).kind == MarkerKind.PULL
    item = bed.item()
    assert item.pull_number == pr["number"]
    assert item.pull_request["html_url"] == pr["html_url"] and item.pull_request["by"] == "session"
    (line,) = notices(bed.fake, "opened")
    assert f"[#{pr['number']}]({pr['html_url']})" in line["body"]
    wait_for(lambda: any(f"Pull request #{pr['number']} opened" in t for t in slack_texts(live)))

    shown = agent(live.env, live.checkout, "the-loop", "pr")
    assert shown.returncode == 0 and f"Pull request #{pr['number']} (open)" in shown.stdout
    again = agent(live.env, live.checkout, "the-loop", "pr", "create", "--title", "x", "--body", "")
    assert again.returncode == 1 and "already open" in again.stderr

    # GitHub's own delivery of the PR the App opened links nothing twice.
    opened = pr_payload("pull_request.opened.json", pr["number"], sha=sha)
    opened["pull_request"]["body"] = body
    bed.send("pull_request", opened)
    assert len(notices(bed.fake, "opened")) == 1 and len(bed.events("pull_request.linked")) == 1


def review_comment(number: int, login: str = "Codertocat") -> dict[str, Any]:
    payload = copy.deepcopy(fixture_json("github/pull_request_review_comment.created.json"))
    payload["pull_request"]["number"] = number
    payload["comment"]["user"]["login"] = login
    payload["comment"]["body"] = "Say hello to the whole world here."
    payload["comment"]["line"] = 3
    return payload


def test_review_comments_and_failing_checks_reach_the_session_and_the_merge_finishes_it(
    live, standin
):
    bed = live.bed
    sha = commit_and_push(live)
    pr = open_pull(live)
    number = pr["number"]

    bed.send("pull_request_review_comment", review_comment(number))
    delivered = run_next_job(bed, live.spawner, live.ctx)
    assert delivered["result"]["delivered"] and delivered["answer"]["receipt"] is True
    wait_for(lambda: b"Say hello" in standin.stdin(bed.item().id))
    seen = standin.stdin(bed.item().id).decode()
    assert f"Review comment on pull request #{number}, `README.md` line 3:" in seen
    assert "@@ -1 +1 @@" in seen and "Follow-up from @Codertocat" in seen
    receipts = [r for r in bed.fake.reactions if r["target"] == f"review_comment:{REPO}"]
    assert [(r["target_id"], r["content"]) for r in receipts] == [(284312630, "eyes")]

    bed.fake.add_check_run(REPO, sha, "Octocoders-linter", "failure", "2 errors", "README.md:3 E1")
    bed.fake.add_check_run(REPO, sha, "unit-tests", "success")
    check = with_installation(data_json("check_run.completed.failure.json"))
    check["check_run"].update(head_sha=sha, pull_requests=[{"number": number}])
    bed.send("check_run", check)
    again = copy.deepcopy(check)  # a second failing report of the same commit: no second job
    again["check_run"]["id"] += 1
    bed.send("check_run", again)
    assert len([j for j in bed.jobs(JobKind.DELIVER) if j.payload["gh_event"] == "check_run"]) == 1
    run_next_job(bed, live.spawner, live.ctx)
    wait_for(lambda: b"Octocoders-linter" in standin.stdin(bed.item().id))
    seen = standin.stdin(bed.item().id).decode()
    assert "Octocoders-linter: failure — 2 errors" in seen and "README.md:3 E1" in seen
    assert "unit-tests" not in seen and f"https://github.com/{REPO}/runs/" in seen
    assert "`the-loop checks log <id>`" in seen  # how to read a failing job's log

    merged = pr_payload("pull_request.closed.json", number, sha=sha)
    merged["pull_request"]["merged"] = True
    bed.send("pull_request", merged)
    item = bed.item()
    assert item.state == WorkItemStatus.DONE and item.pull_request["merged"] is True
    (done,) = bed.events("workitem.done")
    assert done["reason"] == f"pull request #{number} merged"
    assert bed.jobs(JobKind.STOP)  # routing.completion.stopSession

    def progress() -> str:
        marked = [c for c in bed.fake.issue_comments(REPO, 1) if is_marked(c["body"], "progress")]
        return str(marked[0]["body"]) if marked else ""

    wait_for(lambda: "(merged)" in progress() and "**Done.**" in progress(), timeout=15)
    wait_for(lambda: any(f"#{number} merged" in t for t in slack_texts(live)))
    stop = run_next_job(bed, live.spawner, live.ctx)
    assert stop["result"]["stopped"] is True and bed.item().state == WorkItemStatus.DONE
