"""Who may use the App's git gateway, and the GitHub credential it uses on their behalf.

A session's `origin` is the App (`<THE_LOOP_URL>/git/<owner>/<repo>.git`) and its git
authenticates with the session's own token, nothing else. The gateway serves a request
only for the live session of a work item, only for that item's repository, and reaches
GitHub at the clone URL the App recorded for the item — never at one the request names.
Upstream it authenticates with an installation token scoped to that one repository
(`contents: read` to fetch, `contents: write` to push), kept in the App's memory until
shortly before it expires and never handed to anyone: no session, spawner or log sees it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from githubkit_schemas.latest.types import AppPermissionsType

from app.fleet import Principal
from app.gitgate.gitgate_errors import GitGateError
from app.github import GitHubApp, InstallationToken
from app.store import WorkItem, WorkItemStatus

S = WorkItemStatus
# A session is running (or being started) only in these; an exited, stopped, closed or
# finished item's session is dead, and a dead session reaches no repository.
LIVE_SESSION = frozenset({S.SPAWNING, S.RUNNING, S.STALLED})
UPLOAD = "git-upload-pack"  # fetch, clone, ls-remote
RECEIVE = "git-receive-pack"  # push
SERVICES = frozenset({UPLOAD, RECEIVE})
READ: AppPermissionsType = {"contents": "read"}
WRITE: AppPermissionsType = {"contents": "write"}
UPSTREAM_USER = "x-access-token"
# A cached installation token is not used in its last minutes (a push can take a while).
SPARE = timedelta(minutes=10)


class AccessRefused(GitGateError):
    """No git for this request: `status` is the HTTP status, the message what git shows."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def repository_of(owner: str, repo: str) -> str:
    """`owner/repo` from the gateway path's two parts (`.git` optional)."""
    return f"{owner}/{repo.removesuffix('.git')}"


def check(principal: Principal | None, item: WorkItem | None, repository: str) -> WorkItem:
    """The work item whose session may use git on `repository`, or AccessRefused (pure)."""
    if principal is None or principal.work_item_id is None:
        raise AccessRefused(401, "a live session token is required")
    if item is None or not principal.may_act_on(item.id, item.repo_full_name):
        raise AccessRefused(403, "this session token has no work item")
    if repository.lower() != item.repo_full_name.lower():
        raise AccessRefused(403, f"this session may reach only {item.repo_full_name}")
    if item.state not in LIVE_SESSION:
        raise AccessRefused(403, f"{item.id} has no live session (it is {item.state})")
    if item.installation_id is None:
        raise AccessRefused(409, f"{item.id} has no installation to reach GitHub with")
    if urlsplit(item.clone_url).scheme not in ("http", "https"):
        raise AccessRefused(409, f"{item.id}'s repository is not served over HTTP(S)")
    return item


def upstream_url(clone_url: str, tail: str) -> str:
    """The GitHub URL a gateway request goes to: the item's clone URL, then `tail`
    (`info/refs` or a service name)."""
    base = clone_url.rstrip("/")
    return f"{base if base.endswith('.git') else base + '.git'}/{tail}"


@dataclass(frozen=True)
class _Key:
    installation: int
    repository: str
    permission: str


class UpstreamTokens:
    """Installation tokens for the gateway's own use, one per repository and permission,
    minted when first needed and again when the last one is near its end."""

    def __init__(self, github: GitHubApp) -> None:
        self.github = github
        self._lock = threading.Lock()
        self._tokens: dict[_Key, InstallationToken] = {}

    def token(self, item: WorkItem, push: bool, now: datetime) -> str:
        """A token that may fetch (or, for `push`, push to) `item`'s one repository."""
        assert item.installation_id is not None
        name = item.repo_full_name.split("/", 1)[1]
        permissions = WRITE if push else READ
        key = _Key(item.installation_id, name.lower(), "write" if push else "read")
        with self._lock:
            held = self._tokens.get(key)
            if held is not None and held.expires_at - SPARE > now:
                return held.token
        minted = self.github.repository_token(item.installation_id, name, permissions)
        with self._lock:
            self._tokens[key] = minted
        return minted.token
