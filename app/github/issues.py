"""The gate's GitHub calls on one issue: find-or-post a marked comment, read a comment or
the issue, react. A thin edge over githubkit; every decision is made by the callers.

Posting is idempotent through the marker: before posting, the App looks for a comment of
its own (its own bot login, learnt from `GET /app`) carrying the same marker, so a handler
re-run after a crash adopts the comment it already wrote instead of writing a second. A
marked comment by anyone else, another App included, is never adopted; while the App's
login is unknown nothing is.
"""

from __future__ import annotations

from typing import Any

from githubkit.exception import RequestFailed

from app.gate import MarkerKind, is_app_comment
from app.github.client import GitHubApp

GONE = (404, 410)


class IssueIO:
    """GitHub calls about issue `number` of `repo`, as installation `installation_id`."""

    def __init__(self, github: GitHubApp, installation_id: int, repo: str, number: int) -> None:
        self.github = github
        self.client = github.installation(installation_id)
        self.owner, self.name = repo.split("/", 1)
        self.number = number

    def find_marked(self, kind: MarkerKind, **attrs: object) -> int | None:
        """The id of the App's own comment carrying this marker, or None."""
        login = self.github.bot_login()
        if login is None:
            return None
        rest = self.client.rest
        pages = rest.paginate(
            rest.issues.list_comments,
            map_func=lambda resp: resp.json(),
            owner=self.owner,
            repo=self.name,
            issue_number=self.number,
            per_page=100,
        )
        for comment in pages:
            if is_app_comment(comment, login, kind, **attrs):
                return int(comment["id"])
        return None

    def post_once(self, body: str, kind: MarkerKind, **attrs: object) -> tuple[int, bool]:
        """Post `body` unless the App already did; returns (comment id, adopted)."""
        existing = self.find_marked(kind, **attrs)
        if existing is not None:
            return existing, True
        return self.post(body), False

    def post(self, body: str) -> int:
        """Post a new comment; returns its id."""
        resp = self.client.rest.issues.create_comment(
            self.owner, self.name, self.number, data={"body": body}
        )
        return int(resp.json()["id"])

    def edit(self, comment_id: int, body: str) -> bool:
        """Replace one of the App's comments; False when it no longer exists."""
        try:
            self.client.rest.issues.update_comment(
                self.owner, self.name, comment_id, data={"body": body}
            )
        except RequestFailed as exc:
            if exc.response.status_code in GONE:
                return False
            raise
        return True

    def comment_body(self, comment_id: int) -> str | None:
        """A comment's current body; None when it no longer exists."""
        try:
            resp = self.client.rest.issues.get_comment(self.owner, self.name, comment_id)
        except RequestFailed as exc:
            if exc.response.status_code in GONE:
                return None
            raise
        body = resp.json().get("body")
        return body if isinstance(body, str) else ""

    def issue(self) -> dict[str, Any] | None:
        """The issue as GitHub has it now; None when it no longer exists."""
        try:
            resp = self.client.rest.issues.get(self.owner, self.name, self.number)
        except RequestFailed as exc:
            if exc.response.status_code in GONE:
                return None
            raise
        data: Any = resp.json()
        return data if isinstance(data, dict) else None

    def acknowledge(self) -> None:
        """Add an 👀 reaction to the issue itself (GitHub answers 200 for a repeat)."""
        self.client.rest.reactions.create_for_issue(
            self.owner, self.name, self.number, content="eyes"
        )
