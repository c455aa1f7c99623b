"""Links to a work item's repository, branch and artifacts (pure), and the comments that
carry them: the progress comment and the "ready for review" comment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.gate.weblinks import (
    branch_url,
    file_url,
    markdown_link,
    repository_url,
    work_links,
)
from app.store.tables import WorkItem, WorkItemStatus
from app.workitems.decide.advance import decision_text
from app.workitems.decide.walk import Walk
from app.workitems.tell.progress_text import ProgressView, mirror_payload, render_progress

REPO_PAGE = "https://github.com/octo/loop"
ISSUE_PAGE = f"{REPO_PAGE}/issues/7"


@pytest.mark.parametrize(
    ("page", "repo"),
    [
        (ISSUE_PAGE, REPO_PAGE),
        (f"{REPO_PAGE}/pull/12", REPO_PAGE),
        (
            "https://ghe.example.com:8443/acme/web.app/issues/3",
            "https://ghe.example.com:8443/acme/web.app",
        ),
        ("https://github.com/octo/loop", ""),  # not an item's page
        ("javascript:alert(1)//github.com/o/r/issues/1", ""),
        ("https://github.com/o/r)/x/issues/1", ""),
        ("", ""),
    ],
)
def test_the_repository_comes_from_the_items_own_page(page: str, repo: str) -> None:
    assert repository_url(page) == repo


def test_branch_and_path_segments_are_encoded_and_slashes_kept() -> None:
    assert branch_url(REPO_PAGE, "the-loop/issue-7") == f"{REPO_PAGE}/tree/the-loop/issue-7"
    odd = "feat/#1 (x)?y%"
    assert branch_url(REPO_PAGE, odd) == f"{REPO_PAGE}/tree/feat/%231%20%28x%29%3Fy%25"
    assert (
        file_url(REPO_PAGE, "the-loop/issue-7", "docs/specs/issue-7/design.md")
        == f"{REPO_PAGE}/blob/the-loop/issue-7/docs/specs/issue-7/design.md"
    )
    assert branch_url("", "x") == "" and file_url(REPO_PAGE, "", "a.md") == ""


def test_a_link_text_cannot_end_its_code_span_or_its_link() -> None:
    assert markdown_link("a`b", "") == "`a'b`"
    url = branch_url(REPO_PAGE, "x)](javascript:alert(1))")
    assert ")" not in url.removeprefix(REPO_PAGE) and markdown_link("x", url).endswith(f"({url})")


ITEM = "github:octo/loop#7"
VIEW = ProgressView(
    work_item_id=ITEM,
    status=WorkItemStatus.RUNNING,
    walk=Walk(pointer="design"),
    artifacts=("requirements.md",),
    spec_id="issue-7",
    branch="the-loop/issue-7",
    page=ISSUE_PAGE,
)
REQUIREMENTS = f"{REPO_PAGE}/blob/the-loop/issue-7/docs/specs/issue-7/requirements.md"
BRANCH = f"{REPO_PAGE}/tree/the-loop/issue-7"


def test_the_progress_comment_links_artifacts_branch_and_pull_request() -> None:
    pr = {"number": 12, "html_url": f"{REPO_PAGE}/pull/12"}
    text = render_progress(replace(VIEW, pull_request=pr))
    assert f"**Artifacts:** [`docs/specs/issue-7/requirements.md`]({REQUIREMENTS})" in text
    assert f"**Branch:** [`the-loop/issue-7`]({BRANCH})" in text
    assert f"**Pull request:** [#12]({REPO_PAGE}/pull/12)" in text
    links = mirror_payload(VIEW)["links"]
    assert links == {
        "branch": ["the-loop/issue-7", BRANCH],
        "artifacts": [["docs/specs/issue-7/requirements.md", REQUIREMENTS]],
    }


def test_without_a_branch_the_progress_comment_names_without_links() -> None:
    text = render_progress(replace(VIEW, branch=""))
    assert "**Artifacts:** `docs/specs/issue-7/requirements.md`" in text
    assert "**Branch:**" not in text and "](" not in text


def test_the_review_comment_links_artifacts_branch_and_pull_request() -> None:
    item = WorkItem(
        id=ITEM,
        repo_full_name="octo/loop",
        issue_number=7,
        html_url=ISSUE_PAGE,
        state=WorkItemStatus.RUNNING,
        artifacts=["design.md", "requirements.md"],
        branch="the-loop/issue-7",
        pull_request={"number": 12, "html_url": f"{REPO_PAGE}/pull/12"},
    )
    text = decision_text(item, "the-loop approve", "the-loop changes", 3, "review")
    design = REQUIREMENTS.replace("requirements.md", "design.md")
    assert f"[`docs/specs/issue-7/design.md`]({design})" in text
    assert f"[`docs/specs/issue-7/requirements.md`]({REQUIREMENTS})" in text
    assert f"- **Branch:** [`the-loop/issue-7`]({BRANCH})" in text
    assert f"- **Pull request:** [#12]({REPO_PAGE}/pull/12)" in text


def test_an_approval_notice_links_the_file_to_approve_on_the_work_branch() -> None:
    item = WorkItem(
        id=ITEM,
        repo_full_name="octo/loop",
        issue_number=7,
        html_url=ISSUE_PAGE,
        state=WorkItemStatus.RUNNING,
        artifacts=["design.md", "requirements.md"],
        branch="the-loop/issue-7",
        frozen={"skips": {"brainstorming": {}, "approve-tasks": {}}, "stops": ["approve-design"]},
    )
    text = decision_text(item, "the-loop approve", "the-loop changes", 4, "approve-design")
    design = REQUIREMENTS.replace("requirements.md", "design.md")
    assert "### the-loop: `design` waits for approval" in text
    assert f"- **Read:** [`docs/specs/issue-7/design.md`]({design})" in text
    assert "Reply `the-loop approve` to let it go on to `test-planning`" in text
    assert "send it back to `design`" in text


def test_work_links_pair_each_artifact_with_its_page() -> None:
    links = work_links(ISSUE_PAGE, "b", "issue-7", ["a.md"])
    assert links.artifacts == (
        (("docs/specs/issue-7/a.md", f"{REPO_PAGE}/blob/b/docs/specs/issue-7/a.md"),)
    )
