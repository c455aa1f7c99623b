"""A work item's pull request through the real webhook path, with published payloads: linked
when opened by hand from the work branch; reviews, review comments and PR comments from
authorized people delivered (others recorded, never delivered); failing checks once per
head commit; merged → done (even after the issue closed); closed unmerged → the session
stops and the item waits for a reopen or a new execute."""

from __future__ import annotations

import copy
import itertools
import uuid
from typing import Any

import pytest

from app.gate.markers import MarkerKind, is_marked
from app.store.tables import JobKind, WorkItemStatus
from app.workitems.decide.followups import NOT_ADDRESSED
from tests.fakes.github_api import APP_SLUG
from tests.gate_support import comment
from tests.pull_support import (
    BRANCH,
    CONFIG,
    ITEM,
    REPO,
    data_json,
    pr_payload,
    running,
)
from tests.support import fixture_json, wait_for, with_installation

PR = 7
SHA = "a" * 40
IDS = itertools.count(810_000_001)


def opened_by_hand(bed, number: int = PR, branch: str = BRANCH) -> None:
    bed.send("pull_request", pr_payload("pull_request.opened.json", number, branch=branch, sha=SHA))


def review_comment(login: str = "Codertocat", kind: str = "User", body: str = "Why?") -> dict:
    payload = copy.deepcopy(fixture_json("github/pull_request_review_comment.created.json"))
    payload["pull_request"]["number"] = PR
    payload["comment"].update(id=next(IDS), body=body)
    payload["comment"]["user"].update(login=login, type=kind)
    return payload


def review(state: str, body: str | None, login: str = "Codertocat") -> dict[str, Any]:
    payload = data_json("pull_request_review.submitted.json")
    payload["pull_request"]["number"] = PR
    payload["review"].update(id=next(IDS), state=state, body=body)
    payload["review"]["user"]["login"] = login
    return payload


def pr_comment(body: str, login: str = "Codertocat") -> dict[str, Any]:
    payload = comment(body, login=login, cid=next(IDS))
    payload["issue"]["number"] = PR
    payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/{PR}"}
    return payload


def delivered(bed) -> list[dict[str, Any]]:
    return [job.payload for job in bed.jobs(JobKind.DELIVER)]


def notices(bed, event: str, number: int = 1) -> list[dict[str, Any]]:
    found = bed.fake.issue_comments(REPO, number)
    return [c for c in found if is_marked(c["body"], MarkerKind.NOTICE, event=event)]


def test_a_pull_request_opened_by_hand_from_the_work_branch_is_linked(bed):
    running(bed)
    opened_by_hand(bed, number=5, branch="feature/elsewhere")  # not a work branch
    opened_by_hand(bed, number=6, branch="the-loop/issue-99")  # no such work item
    assert bed.item().pull_number is None
    (ignored,) = bed.events("pull_request.link_ignored")
    assert ignored["reason"] == "no-work-item"

    opened_by_hand(bed)
    item = bed.item()
    assert item.pull_number == PR and item.pull_request["by"] == "Codertocat"
    assert item.pull_request["head_sha"] == SHA and item.pull_request["base"] == "master"
    (line,) = notices(bed, "opened")
    assert f"#{PR}" in line["body"] and "by @Codertocat" in line["body"]
    opened_by_hand(bed, number=8)  # a second PR from the same branch is not taken
    assert bed.item().pull_number == PR and len(notices(bed, "opened")) == 1


def test_authorized_reviews_and_pr_comments_reach_the_session_and_others_are_recorded(bed):
    spawner = running(bed)
    opened_by_hand(bed)
    bed.fake.grant(REPO, "mallory", "read")
    bed.send("pull_request_review_comment", review_comment(login="mallory"))
    bed.send("pull_request_review_comment", review_comment(login="ci-bot[bot]", kind="Bot"))
    bed.send("pull_request_review", review("changes_requested", "Not yet.", login="mallory"))
    bed.send("issue_comment", pr_comment("please merge it", login="mallory"))
    assert delivered(bed) == []
    reasons = [e["reason"] for e in bed.events("comment.ignored")]
    assert len(reasons) == 4 and "written by a bot or the App" in reasons
    assert sum("write, maintain or admin" in r for r in reasons) == 3

    bed.send("pull_request_review", review("commented", None))  # its line comments say it all
    assert delivered(bed) == []
    changes = review("changes_requested", "Handle the empty list.")
    bed.send("pull_request_review", changes)
    bed.send("issue_comment", pr_comment("Also bump the version."))
    first, second = delivered(bed)
    assert first["gh_event"] == "pull_request_review" and first["author"] == "Codertocat"
    assert first["body"].startswith(f"Review of pull request #{PR}: the reviewer requested")
    assert "CHANGES REQUESTED" in first["body"] and first["body"].endswith("Handle the empty list.")
    assert second["gh_event"] == "issue_comment" and second["body"] == "Also bump the version."
    assert second["work_item_id"] == ITEM

    # The spawner delivers the review: GitHub takes no reaction on a review, so one line
    # on the pull request is its receipt.
    job = spawner.job(wait=5)
    assert job["kind"] == "deliver"
    answer = spawner.result(job["id"], ok=True, delivered=True, respawned=False).json()
    assert answer["receipt"] is True
    (receipt,) = [c for c in bed.fake.issue_comments(REPO, PR) if "👀" in c["body"]]
    assert "@Codertocat's review reached the session" in receipt["body"]


def check_run(sha: str, number: int = PR) -> dict[str, Any]:
    """A failing check run reported for `sha`: a new run each time (a redelivery of the same
    body would be the same delivery)."""
    payload = with_installation(data_json("check_run.completed.failure.json"))
    run_id = int(uuid.uuid4().int % 10**9)
    payload["check_run"].update(id=run_id, head_sha=sha, pull_requests=[{"number": number}])
    return payload


def test_failing_checks_reach_the_session_once_per_head_commit(bed):
    running(bed)
    opened_by_hand(bed)
    suite = with_installation(data_json("check_suite.completed.json"))
    suite["check_suite"].update(head_sha=SHA, pull_requests=[{"number": PR}])
    bed.send("check_suite", suite)  # conclusion: success
    assert delivered(bed) == []

    bed.fake.add_check_run(REPO, SHA, "lint", "failure", "3 problems", "src/a.py:1 E501")
    bed.fake.add_check_run(REPO, SHA, "tests", "timed_out")
    bed.fake.add_check_run(REPO, SHA, "docs", "success")
    suite["check_suite"]["conclusion"] = "failure"
    bed.send("check_suite", suite)
    bed.send("check_run", check_run(SHA))
    (job,) = delivered(bed)
    text = job["body"]
    assert text.startswith(f"Checks failed on pull request #{PR} at its head commit {SHA[:12]}")
    assert "- lint: failure — 3 problems" in text and "src/a.py:1 E501" in text
    assert "- tests: timed_out" in text and "docs" not in text
    assert f"https://github.com/{REPO}/runs/" in text and job["author"] == "octocoders-linter"

    newer = pr_payload("pull_request.synchronize.json", PR, sha="b" * 40)
    bed.send("pull_request", newer)
    bed.send("check_run", check_run(SHA))  # the old commit: superseded
    assert len(delivered(bed)) == 1
    (stale,) = bed.events("checks.ignored")
    assert stale["reason"] == "not the pull request's head commit"
    bed.send("check_run", check_run("b" * 40))  # no runs listed: the payload's own is told
    assert "Octocoders-linter: failure" in delivered(bed)[1]["body"]


QUIET_CHECKS = CONFIG.replace(
    "routing:\n", "routing:\n  pullRequests: {deliverCheckFailures: false}\n"
)


@pytest.mark.parametrize("pull_config", [QUIET_CHECKS], indirect=True)
def test_check_failures_can_be_switched_off(bed):
    running(bed)
    opened_by_hand(bed)
    bed.send("check_run", check_run(SHA))
    assert delivered(bed) == []


def closed(merged: bool, login: str = "Codertocat") -> dict[str, Any]:
    payload = pr_payload("pull_request.closed.json", PR, sha=SHA)
    payload["pull_request"]["merged"] = merged
    payload["sender"]["login"] = login
    return payload


def test_a_merge_finishes_the_item_even_when_the_issue_closed_first(bed):
    running(bed)
    opened_by_hand(bed)
    issue_closed = with_installation(fixture_json("github/issues.closed.json"))
    issue_closed["repository"] = fixture_json("github/issues.labeled.json")["repository"]
    issue_closed["issue"]["number"] = 1
    bed.send("issues", issue_closed)
    assert bed.item().state == WorkItemStatus.STOPPED
    bed.send("pull_request", closed(merged=True))
    item = bed.item()
    assert item.state == WorkItemStatus.DONE and item.pull_request["merged"] is True
    assert [e["reason"] for e in bed.events("workitem.done")] == [f"pull request #{PR} merged"]


def progress(bed) -> str:
    marked = [c for c in bed.fake.issue_comments(REPO, 1) if is_marked(c["body"], "progress")]
    return str(marked[0]["body"]) if marked else ""


def test_a_pull_request_closed_unmerged_stops_the_session_and_waits_for_a_human(bed):
    spawner = running(bed)
    opened_by_hand(bed)
    bed.send("pull_request", closed(merged=False, login="octocat"))
    item = bed.item()
    assert item.state == WorkItemStatus.PR_CLOSED and item.pull_request["closed"] is True
    (stop,) = bed.jobs(JobKind.STOP)
    assert stop.payload["reason"] == "pull-request-closed"
    (notice,) = notices(bed, "closed")
    assert "closed without merging (by @octocat)" in notice["body"]
    assert "`the-loop execute`" in notice["body"]
    wait_for(lambda: "(closed)" in progress(bed) and "pull request was closed" in progress(bed))

    job = spawner.job(wait=5)
    assert job["kind"] == "stop"
    spawner.result(job["id"], ok=True, stopped=True)
    assert bed.item().state == WorkItemStatus.PR_CLOSED  # the stop does not hide why
    bed.send("issue_comment", pr_comment("Any news?"))
    assert delivered(bed) == []  # no session to tell

    reopened = pr_payload("pull_request.reopened.json", PR, sha=SHA)
    bed.send("pull_request", reopened)
    assert bed.item().state == WorkItemStatus.EXITED and not bed.item().pull_request["closed"]
    (told,) = delivered(bed)
    assert told["source"] == "app" and f"Pull request #{PR} was reopened" in told["body"]

    bed.send("pull_request", closed(merged=False))
    assert bed.item().state == WorkItemStatus.PR_CLOSED
    bed.send("issue_comment", comment("the-loop execute", cid=next(IDS)))
    item = bed.item()
    assert item.state == WorkItemStatus.FROZEN and item.phase and not item.gates
    assert len(bed.jobs(JobKind.SPAWN)) == 2

    def confirmations() -> list[dict[str, Any]]:
        return [c for c in bed.fake.issue_comments(REPO, 1) if is_marked(c["body"], "confirmation")]

    wait_for(lambda: len(confirmations()) >= 2)  # posted once the execute committed
    assert len(confirmations()) == 2  # the new run is confirmed too


MENTION_ONLY = CONFIG.replace("routing:\n", "routing:\n  pullComments: mention\n")


@pytest.mark.parametrize("pull_config", [MENTION_ONLY], indirect=True)
def test_with_mention_only_pr_comments_addressed_to_the_app_reach_the_session(bed):
    spawner = running(bed)
    opened_by_hand(bed)
    # People talking among themselves on the PR: nothing reaches the session, no receipt.
    chat = pr_comment("I think we should ask the agent to split this.")
    bed.send("issue_comment", chat)
    approved = review("approved", "Looks fine to me, Bob?")
    bed.send("pull_request_review", approved)
    assert delivered(bed) == []
    ignored = bed.events("comment.ignored")
    assert [e["reason"] for e in ignored] == [NOT_ADDRESSED] * 2
    # Addressed to the App: by its name, or a line that starts with `the-loop`.
    named = pr_comment(f"@{APP_SLUG.upper()} please split this function.")
    led = pr_comment("Nice.\nthe-loop: also bump the version.")
    # Line comments and requested changes always reach it.
    line = review_comment(body="Why?")
    changes = review("changes_requested", "Handle the empty list.")
    for event, payload in (
        ("issue_comment", named),
        ("issue_comment", led),
        ("pull_request_review_comment", line),
        ("pull_request_review", changes),
    ):
        bed.send(event, payload)
    bodies = [job["body"] for job in delivered(bed)]
    assert len(bodies) == 4
    assert bodies[0] == f"@{APP_SLUG.upper()} please split this function."
    assert bodies[1] == "Nice.\nthe-loop: also bump the version."
    assert "Why?" in bodies[2] and "Handle the empty list." in bodies[3]
    while (job := spawner.job(wait=1)) is not None:  # each delivered one gets its receipt
        assert spawner.result(job["id"], ok=True, delivered=True, respawned=False).is_success
    eyes = {r["target_id"] for r in bed.fake.reactions if r["content"] == "eyes"}
    reached = {named["comment"]["id"], led["comment"]["id"], line["comment"]["id"]}
    assert reached <= eyes and chat["comment"]["id"] not in eyes
    said = [c["body"] for c in bed.fake.issue_comments(REPO, PR) if "👀" in c["body"]]
    assert len(said) == 1 and f"review={changes['review']['id']}" in said[0]
    assert f"review={approved['review']['id']}" not in said[0]
