"""The GitHub calls about one repository's pull requests: open one, read the default branch,
tell whether a branch exists, list a commit's failing checks, react to a review comment. A
thin edge over githubkit; the decisions are the callers'."""

from __future__ import annotations

from typing import Any

from githubkit.exception import RequestFailed

from app.gate import FAILING_CONCLUSIONS, CheckFailure
from app.github.client import GitHubApp
from app.github.github_errors import GitHubError


class PullRefused(GitHubError, RuntimeError):
    """GitHub would not open the pull request (422: no such branch, nothing to merge, one
    already open); the message is GitHub's own."""


def _message(exc: RequestFailed) -> str:
    try:
        data: Any = exc.response.json()
    except ValueError:
        return str(exc)
    if not isinstance(data, dict):
        return str(exc)
    details = [str(e.get("message") or e) for e in data.get("errors") or [] if e]
    return "; ".join([str(data.get("message") or "refused"), *details])


class PullIO:
    """GitHub calls about pull requests of `repo`, as installation `installation_id`."""

    def __init__(self, github: GitHubApp, installation_id: int, repo: str) -> None:
        self.client = github.installation(installation_id)
        self.owner, self.name = repo.split("/", 1)

    def default_branch(self) -> str:
        """The repository's default branch, as GitHub has it now."""
        data = self.client.rest.repos.get(self.owner, self.name).json()
        return str(data.get("default_branch") or "main")

    def branch_exists(self, branch: str) -> bool:
        """Whether `branch` exists on GitHub now (its 404 says no; other failures raise)."""
        try:
            self.client.rest.repos.get_branch(self.owner, self.name, branch)
        except RequestFailed as exc:
            if exc.response.status_code == 404:
                return False
            raise
        return True

    def create(self, *, title: str, head: str, base: str, body: str) -> dict[str, Any]:
        """Open a pull request; returns GitHub's pull request object (raises PullRefused)."""
        try:
            resp = self.client.rest.pulls.create(
                self.owner,
                self.name,
                data={"title": title, "head": head, "base": base, "body": body},
            )
        except RequestFailed as exc:
            if exc.response.status_code == 422:
                raise PullRefused(_message(exc)) from exc
            raise
        data: Any = resp.json()
        return data if isinstance(data, dict) else {}

    def failing_checks(self, sha: str) -> list[CheckFailure]:
        """The latest run of every check on commit `sha` that failed."""
        resp = self.client.rest.checks.list_for_ref(
            self.owner, self.name, sha, filter_="latest", per_page=100
        )
        data: Any = resp.json()
        runs = data.get("check_runs") or [] if isinstance(data, dict) else []
        return [check_failure(run) for run in runs if run.get("conclusion") in FAILING_CONCLUSIONS]

    def acknowledge_review_comment(self, comment_id: int) -> None:
        """The 👀 receipt on a review comment (its own endpoint, apart from issue comments)."""
        self.client.rest.reactions.create_for_pull_request_review_comment(
            self.owner, self.name, comment_id, content="eyes"
        )


def check_failure(run: dict[str, Any]) -> CheckFailure:
    """A check run object (REST or webhook: the same shape) as a failure to report."""
    output = run.get("output") or {}
    return CheckFailure(
        name=str(run.get("name") or "a check"),
        conclusion=str(run.get("conclusion") or ""),
        title=str(output.get("title") or ""),
        summary=str(output.get("summary") or ""),
        url=str(run.get("html_url") or run.get("details_url") or ""),
    )
