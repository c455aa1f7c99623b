"""The pure parts of pull requests: the work branch's name, the config key, the transitions a
pull request adds, the texts a session and GitHub read, and the checkout's branch setup on
real git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.config.operator_config import ConfigError, PullComments, load_config, parse_config
from app.gate.ids import issue_of_branch, work_branch
from app.gate.markers import MarkerKind, find_marker
from app.gate.pull_texts import (
    MAX_HUNK_LINES,
    CheckFailure,
    addresses_the_app,
    checks_text,
    pull_body,
    review_comment_text,
    review_text,
)
from app.spawner.confine.hostwalk import tidy
from app.spawner.workspace.checkout import CheckoutError
from app.spawner.workspace.hostgit import HostGit
from app.spawner.workspace.workbranch import (
    configure_push,
    gateway_remote,
    helper_command,
    switch_to,
)
from app.store.tables import WorkItemStatus
from app.workitems.flow.states import Happened, next_status
from tests.spawner_support import bare_repository, git

S = WorkItemStatus


def test_the_work_branch_names_the_issue_and_reads_back() -> None:
    assert work_branch("the-loop/", 7) == "the-loop/issue-7"
    assert work_branch("bots-", 12) == "bots-issue-12"
    assert issue_of_branch("the-loop/", "the-loop/issue-7") == 7
    for other in ("the-loop/issue-07", "the-loop/issue-7x", "feature/issue-7", "the-loop/"):
        assert issue_of_branch("the-loop/", other) is None


@pytest.mark.parametrize("prefix", ["", "/x/", "a..b/", "-x/", "x", "has space/", "x.lock./"])
def test_a_branch_prefix_git_would_refuse_is_a_config_error(prefix: str) -> None:
    with pytest.raises(ConfigError, match=r"routing\.pullRequests\.branchPrefix"):
        parse_config({"routing": {"pullRequests": {"branchPrefix": prefix}}}, "c.yaml")


def test_pull_request_settings_default_on() -> None:
    settings = parse_config({}, "c.yaml").routing.pull_requests
    assert settings.branch_prefix == "the-loop/" and settings.deliver_check_failures is True


@pytest.mark.parametrize(
    ("current", "happened", "expected"),
    [
        (S.RUNNING, Happened.PR_CLOSED, S.PR_CLOSED),
        (S.EXITED, Happened.PR_CLOSED, S.PR_CLOSED),
        (S.DONE, Happened.PR_CLOSED, None),
        (S.PR_CLOSED, Happened.STOP_OK, None),  # the stop it asked for keeps the reason
        (S.PR_CLOSED, Happened.PR_REOPENED, S.EXITED),
        (S.RUNNING, Happened.PR_REOPENED, None),
        (S.PR_CLOSED, Happened.EXECUTED, S.FROZEN),
        (S.PR_CLOSED, Happened.CLOSED, S.CLOSED),
        (S.STOPPED, Happened.PR_MERGED, S.DONE),  # the issue closed as the PR merged
        (S.RUNNING, Happened.PR_MERGED, S.DONE),
        (S.PARKED, Happened.PR_MERGED, None),
        (S.STOPPED, Happened.COMPLETED, None),
    ],
)
def test_pull_request_transitions(current: str, happened: Happened, expected: str | None) -> None:
    assert next_status(current, happened) == expected


def test_the_pull_body_closes_the_issue_and_defuses_markers() -> None:
    body = pull_body("Fix it.\n<!-- the-loop:confirmation item=x -->", 7, "github:o/r#7")
    assert body.startswith("Fix it.\n&lt;!-- the-loop:confirmation")
    assert "\n\nCloses #7\n\n" in body
    found = find_marker(body)
    assert found is not None and found.kind == MarkerKind.PULL
    assert found.attrs["item"] == "github:o/r#7"


def test_the_pull_bodys_mentions_notify_nobody_unless_the_operator_allows_them() -> None:
    body = pull_body("Thanks @octocat, cc @acme/team.", 7, "github:o/r#7")
    assert "@\u200boctocat" in body and "@\u200bacme/team" in body and "@octocat" not in body
    allowed = pull_body("Thanks @octocat.", 7, "github:o/r#7", allow_mentions=True)
    assert "Thanks @octocat." in allowed


def test_a_review_comment_says_where_then_the_hunk_then_the_words() -> None:
    hunk = "\n".join(f"+line {n}" for n in range(100))
    text = review_comment_text(3, "src/a.py", 12, 10, "@@ -1 +1 @@\n" + hunk, " Rename this. ")
    lines = text.splitlines()
    assert lines[0] == "Review comment on pull request #3, `src/a.py` lines 10-12:"
    assert lines[1] == "```diff" and lines[2] == "…" and lines[-1] == "Rename this."
    assert "+line 99" in text and "+line 50" not in text
    assert len(lines) == MAX_HUNK_LINES + 6
    single = review_comment_text(3, "README.md", 5, None, "", "Nit.")
    assert single == "Review comment on pull request #3, `README.md` line 5:\n\nNit."


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("CHANGES_REQUESTED", "CHANGES REQUESTED"),
        ("approved", "the reviewer approved the pull request."),
        ("commented", "reviewed the pull request with a comment"),
        ("dismissed", "submitted a review (dismissed)"),
    ],
)
def test_a_review_says_its_verdict(state: str, says: str) -> None:
    text = review_text(4, state, "Words.")
    assert text.startswith("Review of pull request #4:") and says in text
    assert text.endswith("\n\nWords.")


def test_failing_checks_list_names_summaries_and_links() -> None:
    failures = [
        CheckFailure("lint", "failure", "2 errors", "x" * 1000, "https://ci/1"),
        CheckFailure("tests", "timed_out"),
    ]
    text = checks_text(9, "c" * 40, failures)
    assert (
        text.splitlines()[0] == "Checks failed on pull request #9 at its head commit cccccccccccc:"
    )
    assert "- lint: failure — 2 errors (https://ci/1)" in text
    assert "- tests: timed_out\n" in text and "x" * 600 + " […]" in text and "x" * 601 not in text


def handed(work: Path, host: HostGit) -> Path:
    """`work` made its session's, as the spawner makes a checkout before any git of its
    touches it (`prepare_checkout`): the tests' own git writes in it as the tests' user."""
    tidy(work, host.owner)
    return work


def git_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home)}


def test_the_checkout_names_only_the_loops_helper(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    work = tmp_path / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    gateway = gateway_remote("http://127.0.0.1:8000/", "o/r")
    host = HostGit(git_env(home))
    assert gateway == "http://127.0.0.1:8000/git/o/r.git"
    configure_push(handed(work, host), host, gateway)
    configure_push(handed(work, host), host, gateway)  # a respawn configures again: same result
    import subprocess

    listed = subprocess.run(
        ["git", "-C", str(work), "config", "--get-all", "credential.helper"],
        env={**git_env(home), "GIT_CONFIG_PARAMETERS": "'safe.directory=*'"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    # The user's `store` first, then the checkout's empty entry, which resets the list
    # (git's rule), then the-loop's helper: the only one git runs here.
    assert listed[:3] == ["store", "", helper_command()]
    local = (work / ".git" / "config").read_text()
    assert "useHttpPath = true" in local and "autoSetupRemote = true" in local
    assert f"url = {gateway}" in local  # origin is the App, not GitHub
    git("remote", "remove", "origin", cwd=work)  # what a session may do to its checkout
    configure_push(handed(work, host), host, gateway)
    assert f"url = {gateway}" in (work / ".git" / "config").read_text()
    # Or it gave origin a second URL, or took its URL and left the rest: one URL, the App's.
    git("remote", "set-url", "--add", "origin", "http://elsewhere.example/r.git", cwd=work)
    configure_push(handed(work, host), host, gateway)
    assert git("remote", "get-url", "--all", "origin", cwd=work).split() == [gateway]
    git("config", "--unset-all", "remote.origin.url", cwd=work)
    configure_push(handed(work, host), host, gateway)
    assert git("remote", "get-url", "--all", "origin", cwd=work).split() == [gateway]


def test_switching_to_the_work_branch(tmp_path: Path) -> None:
    origin = bare_repository(tmp_path)
    work = tmp_path / "work"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    env = HostGit(git_env(tmp_path))
    assert switch_to(handed(work, env), "the-loop/issue-1", env) == "created"
    assert switch_to(handed(work, env), "the-loop/issue-1", env) == "current"
    git("switch", "-q", "main", cwd=work)
    assert switch_to(handed(work, env), "the-loop/issue-1", env) == "switched"
    with pytest.raises(CheckoutError, match="not a branch name"):
        switch_to(handed(work, env), "-x", env)
    with pytest.raises(CheckoutError, match="not a branch name"):
        switch_to(handed(work, env), "a..b", env)

    # Local changes that a switch would overwrite: git refuses, and so does the spawner.
    git("switch", "-q", "-c", "other", cwd=work)
    (work / "README.md").write_text("changed on other\n")
    git("commit", "-q", "-am", "other", cwd=work)
    git("switch", "-q", "the-loop/issue-1", cwd=work)
    (work / "README.md").write_text("uncommitted\n")
    with pytest.raises(CheckoutError, match="git switch failed"):
        switch_to(handed(work, env), "other", env)


def test_a_new_work_branch_is_cut_from_the_base_branch(tmp_path: Path) -> None:
    origin = bare_repository(tmp_path)
    src = tmp_path / "origin.git-src"
    git("switch", "-q", "-c", "release/2.4", cwd=src)
    (src / "RELEASE").write_text("2.4\n")
    git("add", "RELEASE", cwd=src)
    git("commit", "-q", "-m", "release", cwd=src)
    git("push", "-q", str(origin), "release/2.4", cwd=src)
    work = tmp_path / "work"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    env = HostGit(git_env(tmp_path))
    assert switch_to(handed(work, env), "the-loop/issue-1", env, "release/2.4") == "created"
    assert (work / "RELEASE").read_text() == "2.4\n"
    tip = git("rev-parse", "origin/release/2.4", cwd=work).strip()
    assert git("rev-parse", "HEAD", cwd=work).strip() == tip
    # Not tracking the base: a plain `git push` publishes the work branch, not the base.
    config = (work / ".git" / "config").read_text()
    assert '[branch "the-loop/issue-1"]' not in config
    with pytest.raises(CheckoutError, match="not in the checkout"):
        switch_to(handed(work, env), "the-loop/issue-2", env, "release/9.9")
    with pytest.raises(CheckoutError, match="not a branch name"):
        switch_to(handed(work, env), "the-loop/issue-2", env, "a..b")


@pytest.mark.parametrize(
    ("body", "addressed"),
    [
        ("@the-loop-test please split this", True),
        ("Thanks @The-Loop-Test.", True),
        ("@the-loop-testing is another app", False),
        ("mail me at x@the-loop-test", False),
        ("the-loop: bump the version", True),
        ("Looks good.\n  THE-LOOP also add a test", True),
        ("loopy do this", True),  # the first word of a configured keyword
        ("I think we should ask the-loop to do it", False),
        ("@octocat what do you think?", False),
    ],
)
def test_a_pr_comment_addresses_the_app_by_name_or_a_leading_word(body: str, addressed: bool):
    assert addresses_the_app(body, "the-loop-test[bot]", {"the-loop", "loopy"}) is addressed


def test_pr_comments_default_to_all_in_a_config_file_and_to_mention_without_one(tmp_path: Path):
    assert parse_config({}).routing.pull_comments is PullComments.ALL  # an older file: as before
    assert load_config(tmp_path / "absent.yaml").routing.pull_comments is PullComments.MENTION
    written = parse_config({"routing": {"pullComments": "mention"}})
    assert written.routing.pull_comments is PullComments.MENTION
    with pytest.raises(ConfigError, match="pullComments"):
        parse_config({"routing": {"pullComments": "some"}})
