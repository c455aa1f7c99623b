"""The GitHub calls behind `the-loop checks`: one commit's check runs and one Actions job's
log, read by the App for a session that holds no GitHub credential.

Each use mints a token for the one repository with `ACTIONS_PERMISSIONS` and revokes it when
done (`actions_io`). A job's log is `GET …/actions/jobs/{id}/logs`, which GitHub answers with a
302 to a short-lived download URL on another host: the App follows it itself with a plain
client that carries no token, reads at most `DOWNLOAD_MAX_BYTES` within
`DOWNLOAD_SECONDS`, and keeps only the end (`app.gate.log_tail` bounds what is shown).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from githubkit.exception import GitHubException, RequestFailed
from githubkit_schemas.latest.types import AppPermissionsType

from app.gate import MAX_LOG_BYTES
from app.github.client import GitHubApp
from app.github.github_errors import GitHubError

# Reading check runs and Actions job logs of one repository, nothing else.
ACTIONS_PERMISSIONS: AppPermissionsType = {"actions": "read", "checks": "read", "metadata": "read"}
DOWNLOAD_MAX_BYTES = 64 * 1024 * 1024
DOWNLOAD_SECONDS = 60.0
# The reader keeps this much of a log's end: enough for the byte bound and the line cut.
KEEP_BYTES = 2 * MAX_LOG_BYTES
RUN_PAGES = 5

log = logging.getLogger(__name__)


class NoJobLog(GitHubError, RuntimeError):
    """GitHub has no Actions log for this check run: it is not an Actions job, or its log
    has expired."""


class LogUnavailable(GitHubError, RuntimeError):
    """The log could not be fetched (no download link, or the download failed)."""


@dataclass(frozen=True)
class JobLog:
    """The end of a job's log as read: `data`, whether the log `began_earlier` than it, and
    whether reading stopped at the size or time bound before the log's end (`incomplete`)."""

    data: bytes
    began_earlier: bool
    incomplete: bool


def check_run_row(run: dict[str, Any]) -> dict[str, Any]:
    """What a session is told of a check run (REST shape), and nothing more (pure)."""
    output = run.get("output") or {}
    return {
        "id": run.get("id"),
        "name": str(run.get("name") or ""),
        "status": str(run.get("status") or ""),
        "conclusion": str(run.get("conclusion") or ""),
        "title": str(output.get("title") or ""),
        "html_url": str(run.get("html_url") or ""),
    }


def download_allowed(url: str, api_base: str) -> bool:
    """A download link the App follows: https anywhere, or plain http only on the API's own
    origin (a test double or an Enterprise server without TLS) (pure)."""
    got, api = urlsplit(url), urlsplit(api_base)
    if got.scheme == "https" and got.hostname:
        return True
    return got.scheme == "http" and (got.scheme, got.netloc) == (api.scheme, api.netloc)


class ActionsIO:
    """Check runs and job logs of `owner/name`, with a token minted for that alone."""

    def __init__(self, github: GitHubApp, token: str, owner: str, name: str) -> None:
        self._github = github
        self._client = github.token_client(token, follow_redirects=False)
        self.owner, self.name = owner, name

    def check_runs(self, sha: str, *, latest: bool = True) -> list[dict[str, Any]]:
        """Commit `sha`'s check runs: the latest of each check, or every run (`latest=False`)."""
        runs: list[dict[str, Any]] = []
        for page in range(1, RUN_PAGES + 1):
            data: Any = self._client.rest.checks.list_for_ref(
                self.owner,
                self.name,
                sha,
                filter_="latest" if latest else "all",
                per_page=100,
                page=page,
            ).json()
            batch = data.get("check_runs") or [] if isinstance(data, dict) else []
            runs += [r for r in batch if isinstance(r, dict)]
            if len(batch) < 100:
                break
        return runs

    def job_log(self, job_id: int) -> JobLog:
        """The end of Actions job `job_id`'s log (NoJobLog, LogUnavailable)."""
        path = f"/repos/{self.owner}/{self.name}/actions/jobs/{job_id}/logs"
        try:
            resp = self._client.request("GET", path)
        except RequestFailed as exc:
            if exc.response.status_code in (404, 410):
                raise NoJobLog(f"GitHub has no log for job {job_id}") from exc
            raise
        location = resp.raw_response.headers.get("location", "")
        if resp.status_code not in (301, 302, 303, 307, 308) or not location:
            raise LogUnavailable(f"GitHub answered {resp.status_code} without a download link")
        if not download_allowed(location, self._github.base_url):
            raise LogUnavailable("GitHub's download link is not https")
        return self._download(location)

    def _download(self, url: str) -> JobLog:
        kept, total, incomplete = bytearray(), 0, False
        deadline = time.monotonic() + DOWNLOAD_SECONDS
        try:
            with (
                httpx.Client(
                    verify=self._github.ssl_context,
                    timeout=30.0,
                    follow_redirects=True,
                    max_redirects=3,
                ) as http,
                http.stream("GET", url) as resp,
            ):
                if resp.status_code in (404, 410):
                    raise NoJobLog("the log's download link has expired or is gone")
                resp.raise_for_status()
                for chunk in resp.iter_bytes(64 * 1024):
                    total += len(chunk)
                    kept += chunk
                    if len(kept) > KEEP_BYTES:
                        del kept[: len(kept) - KEEP_BYTES]
                    if total >= DOWNLOAD_MAX_BYTES or time.monotonic() > deadline:
                        incomplete = True
                        break
        except httpx.HTTPError as exc:
            raise LogUnavailable(f"downloading the log failed: {exc}") from exc
        return JobLog(bytes(kept), began_earlier=total > len(kept), incomplete=incomplete)


@contextmanager
def actions_io(github: GitHubApp, installation_id: int, repo: str) -> Iterator[ActionsIO]:
    """An `ActionsIO` for `repo` whose token is revoked when the block ends."""
    owner, name = repo.split("/", 1)
    minted = github.repository_token(installation_id, name, ACTIONS_PERMISSIONS)
    try:
        yield ActionsIO(github, minted.token, owner, name)
    finally:
        try:
            github.revoke(minted.token)
        except GitHubException as exc:  # it expires within the hour anyway
            log.warning("could not revoke the checks token: %s", exc)
