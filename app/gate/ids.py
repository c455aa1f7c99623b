"""Names of a work item: `github:<owner>/<repo>#<n>` in the store, `issue-<n>` in a checkout,
`<prefix>issue-<n>` for the branch its session works on."""

from __future__ import annotations

import re

_SPEC_RE = re.compile(r"issue-([1-9][0-9]{0,9})")


def work_item_id_of(repo_full_name: str, issue_number: int) -> str:
    return f"github:{repo_full_name}#{issue_number}"


def spec_id(issue_number: int) -> str:
    return f"issue-{issue_number}"


def work_branch(prefix: str, issue_number: int) -> str:
    """The branch a session works on for an issue: `the-loop/issue-7` with the default prefix.
    Computed here only; the App records it on the item and every job carries it."""
    return f"{prefix}{spec_id(issue_number)}"


def issue_of_branch(prefix: str, ref: str) -> int | None:
    """The issue number a work branch names (`the-loop/issue-7` → 7), else None."""
    if not ref.startswith(prefix):
        return None
    match = _SPEC_RE.fullmatch(ref[len(prefix) :])
    return int(match.group(1)) if match else None


_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")
MAX_BRANCH = 255  # GitHub's own limit on a ref's name


def branch_name_ok(name: str) -> bool:
    """Whether git takes `name` as a branch name: `git check-ref-format --branch`'s rules,
    in pure form (the App checks a human's `base:` word with it before asking GitHub).

    No control characters, space, `~ ^ : ? * [ \\`, `..`, `@{` or `//`; no component that
    starts with `.` or ends with `.lock`; not starting with `-` or `/`, not ending with `/`
    or `.`; not `@` nor `HEAD`."""
    if not name or len(name) > MAX_BRANCH or name in ("@", "HEAD"):
        return False
    if name.startswith(("-", "/")) or name.endswith(("/", ".")) or _REF_FORBIDDEN.search(name):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))
