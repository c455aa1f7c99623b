"""Names of a work item: `github:<owner>/<repo>#<n>` in the store, `issue-<n>` in a checkout."""

from __future__ import annotations


def work_item_id(repo_full_name: str, issue_number: int) -> str:
    return f"github:{repo_full_name}#{issue_number}"


def spec_id(issue_number: int) -> str:
    return f"issue-{issue_number}"
