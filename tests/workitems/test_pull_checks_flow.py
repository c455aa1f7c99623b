"""A session reads its pull request's CI through the App, with the commands an agent runs:
`the-loop checks` lists the failing check runs on the PR's head commit and `the-loop checks
log <id>` prints the end of a failing Actions job's log, which the App fetches from GitHub
(following the 302 to the download link without its token). The session holds no GitHub
token; a check run of any other commit is refused.

Real App, database, tmux, git, git-over-HTTP and spawner code; fake GitHub (its check runs
and job logs) and Slack; the session's harness is a stand-in.
"""

from __future__ import annotations

from types import SimpleNamespace

from tests.pull_support import REPO, agent, commit_and_push

READ_CI = {"actions": "read", "checks": "read", "metadata": "read"}


def open_pull(live: SimpleNamespace) -> dict:
    created = agent(
        live.env, live.checkout, "the-loop", "pr", "create", "--title", "Fix", "--body", "Fixes."
    )
    assert created.returncode == 0, created.stderr
    (pr,) = live.bed.fake.pull_requests(REPO)
    return pr


def build_log(lines: int) -> str:
    """An Actions log as GitHub serves it: a BOM, CRLF line ends, colour escapes."""
    body = "".join(f"\x1b[36;1mstep {i:04d} of the build\x1b[0m\r\n" for i in range(1, lines))
    return "\ufeff" + body + "Error: README.md:3 E1 line too long\r\n"


def test_the_session_lists_its_failing_checks_and_reads_the_end_of_a_job_log(live):
    bed = live.bed
    sha = commit_and_push(live)
    early = agent(live.env, live.checkout, "the-loop", "checks")
    assert early.returncode == 1 and "no pull request yet" in early.stderr

    pr = open_pull(live)
    lint = bed.fake.add_check_run(REPO, sha, "lint", "failure", "2 errors")
    bed.fake.add_check_run(REPO, sha, "unit-tests", "success")
    outside = bed.fake.add_check_run(REPO, sha, "external-ci", "failure")  # no Actions job
    bed.fake.add_job_log(REPO, lint["id"], build_log(3000))

    listed = agent(live.env, live.checkout, "the-loop", "checks")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        f"Failing checks on pull request #{pr['number']} at {sha[:12]}:\n"
        f"  {lint['id']}  lint  failure — 2 errors\n"
        f"  {outside['id']}  external-ci  failure\n"
        "Other checks: 1 success.\n"
        "A failing job's log: `the-loop checks log <id>`.\n"
    )

    shown = agent(live.env, live.checkout, "the-loop", "checks", "log", str(lint["id"]))
    assert shown.returncode == 0, shown.stderr
    head, *lines = shown.stdout.splitlines()
    assert head.startswith(f"Log of check run {lint['id']} (lint: failure), its last 2000 lines")
    # The log's last 2,000 lines, as plain text: the first 1,000 are left out.
    assert len(lines) == 2000
    assert lines[0] == "step 1001 of the build" and lines[-2] == "step 2999 of the build"
    assert lines[-1] == "Error: README.md:3 E1 line too long"
    assert "step 1000 " not in shown.stdout and "\x1b" not in shown.stdout
    assert "\r" not in shown.stdout

    # The App followed GitHub's redirect itself and sent the download link no token; the
    # token it minted could read CI only, and was revoked once used.
    (download,) = bed.fake.calls("GET", r"^/_blobs/job-logs/")
    assert not {k.lower() for k in download.headers} & {"authorization"}
    minted = [t for t, m in bed.fake.tokens.items() if m["permissions"] == READ_CI]
    assert len(minted) == 2 and all(bed.fake.tokens[t]["revoked"] for t in minted)
    assert all(bed.fake.tokens[t]["repositories"] == ["Hello-World"] for t in minted)
    assert not any(t in str(live.env) for t in minted)

    # A check that is not an Actions job has no log; the refusal says where to look.
    none = agent(live.env, live.checkout, "the-loop", "checks", "log", str(outside["id"]))
    assert none.returncode == 1 and "has no GitHub Actions log" in none.stderr
    assert outside["html_url"] in none.stderr

    # A check run of another commit (another PR, or an older push) is refused before GitHub
    # is asked for its log.
    asked = len(bed.fake.calls("GET", r"/actions/jobs/"))
    elsewhere = bed.fake.add_check_run(REPO, "f" * 40, "lint", "failure")
    bed.fake.add_job_log(REPO, elsewhere["id"], "another pull request's log\n")
    refused = agent(live.env, live.checkout, "the-loop", "checks", "log", str(elsewhere["id"]))
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"check run {elsewhere['id']} is not on the head commit {sha[:12]}" in refused.stderr
    assert len(bed.fake.calls("GET", r"/actions/jobs/")) == asked

    # Without the session's token the App answers nothing.
    stranger = agent(
        {**live.env, "THE_LOOP_SESSION_TOKEN": "not-a-token"},
        live.checkout,
        *("the-loop", "checks", "log", str(lint["id"])),
    )
    assert stranger.returncode == 1 and "refused" in stranger.stderr
