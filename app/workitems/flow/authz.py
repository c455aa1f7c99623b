"""Who may execute a work item or direct its session.

`routing.authorizedUsers` when the operator declared it; otherwise anyone whose permission on
the repository is write, maintain or admin (asked through the API, cached briefly).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

from githubkit.exception import RequestFailed

from app.config import OperatorConfig
from app.github.client import GitHubApp
from app.services import Services

PERMITTED_ROLES = frozenset({"write", "maintain", "admin"})
CACHE_SECONDS = 60.0


class PermissionCache:
    """Repository permission lookups, remembered for `CACHE_SECONDS`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str, str], tuple[float, str]] = {}

    def role(self, github: GitHubApp, installation_id: int, repo: str, login: str) -> str:
        key = (installation_id, repo.lower(), login.lower())
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit and now - hit[0] < CACHE_SECONDS:
                return hit[1]
        owner, name = repo.split("/", 1)
        client = github.installation(installation_id)
        try:
            resp = client.rest.repos.get_collaborator_permission_level(owner, name, login)
            data = resp.parsed_data
            role = (getattr(data, "role_name", None) or data.permission or "none").lower()
        except RequestFailed as exc:
            if exc.response.status_code in (403, 404):
                role = "none"
            else:
                raise
        with self._lock:
            self._entries[key] = (now, role)
        return role


def why_not_authorized(
    config: OperatorConfig,
    github: GitHubApp,
    cache: PermissionCache,
    installation_id: int | None,
    repo: str,
    login: str,
) -> str | None:
    """None when `login` may act on `repo`; otherwise a short reason to show and record."""
    allowed = config.routing.authorized_users
    if allowed is not None:
        if login.lower() in {u.lower() for u in allowed}:
            return None
        return f"@{login} is not in routing.authorizedUsers"
    if installation_id is None:
        return "the delivery names no installation to check permissions with"
    role = cache.role(github, installation_id, repo, login)
    if role in PERMITTED_ROLES:
        return None
    return f"@{login} has {role!r} permission; write, maintain or admin is required"


_CACHES: weakref.WeakKeyDictionary[GitHubApp, PermissionCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def permission_cache(github: GitHubApp) -> PermissionCache:
    """The process's permission cache for this App identity (60 s lifetime per entry)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(github)
        if cache is None:
            cache = _CACHES[github] = PermissionCache()
        return cache


def refusal(services: Services, installation_id: int | None, repo: str, login: str) -> str | None:
    """`why_not_authorized` with the process's permission cache: the one rule every surface
    (an execute, a follow-up, a Slack press, an approval) applies."""
    github = services.github
    return why_not_authorized(
        services.config, github, permission_cache(github), installation_id, repo, login
    )
