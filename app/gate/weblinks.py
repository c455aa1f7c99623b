"""Web links to a work item's things on GitHub (pure): its repository, its work branch, each
artifact file on that branch, so the comments and the Slack parent link what they name.

The repository's address comes from the item's own page (an issue's or a pull request's
`html_url`, as GitHub sent it, so a GitHub Enterprise host works too). Every branch and path
segment is percent-encoded: a branch name is only as tame as git allows, and no character
of it may end a Markdown or Slack link early.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

_ITEM_PAGE_RE = re.compile(
    r"(https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._-]+){2})/(?:issues|pull)/[0-9]+/?"
)


def repository_url(item_page: str) -> str:
    """`https://github.com/o/r` from `https://github.com/o/r/issues/7` (or `/pull/7`); ""
    when the address is not an issue's or pull request's page."""
    match = _ITEM_PAGE_RE.fullmatch(item_page or "")
    return match.group(1) if match else ""


def _segments(path: str) -> str:
    return "/".join(quote(part, safe="") for part in path.split("/"))


def branch_url(repo_url: str, branch: str) -> str:
    """The branch's page (`…/tree/<branch>`); "" without a repository or a branch."""
    if not repo_url or not branch:
        return ""
    return f"{repo_url}/tree/{_segments(branch)}"


def file_url(repo_url: str, branch: str, path: str) -> str:
    """A file's page on `branch` (`…/blob/<branch>/<path>`); "" when any part is missing."""
    if not repo_url or not branch or not path:
        return ""
    return f"{repo_url}/blob/{_segments(branch)}/{_segments(path)}"


def artifact_path(spec_id: str, name: str) -> str:
    """Where an artifact lives in the checkout: `docs/specs/<spec-id>/<name>`."""
    return f"docs/specs/{spec_id}/{name}" if spec_id else name


@dataclass(frozen=True)
class WorkLinks:
    """A work item's branch and artifacts, each with its page ("" when it has none)."""

    branch: str = ""
    branch_url: str = ""
    artifacts: tuple[tuple[str, str], ...] = ()  # (path in the repository, its page)

    def to_json(self) -> dict[str, object]:
        return {
            "branch": [self.branch, self.branch_url] if self.branch else None,
            "artifacts": [list(pair) for pair in self.artifacts],
        }


def work_links(item_page: str, branch: str, spec_id: str, artifacts: Sequence[str]) -> WorkLinks:
    """The links of a work item whose page is `item_page` and whose session works on
    `branch` (pure)."""
    repo = repository_url(item_page)
    paths = [artifact_path(spec_id, name) for name in artifacts]
    return WorkLinks(
        branch=branch,
        branch_url=branch_url(repo, branch),
        artifacts=tuple((path, file_url(repo, branch, path)) for path in paths),
    )


def code_text(text: str) -> str:
    """`text` as a Markdown code span that nothing in it can end early."""
    return "`" + text.replace("`", "'") + "`"


def markdown_link(text: str, url: str) -> str:
    """`text` as a code span, linked to `url` when there is one."""
    shown = code_text(text)
    return f"[{shown}]({url})" if url else shown
