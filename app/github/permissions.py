"""Who may act on a repository, as GitHub answers it: permission lookups, remembered briefly.

Each App's `Services.permissions` holds its own cache, so nothing of it outlives its App.
`app.workitems.flow.authz` decides who may act; this asks GitHub and remembers the answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from githubkit.exception import RequestFailed

if TYPE_CHECKING:
    from app.github.client import GitHubApp

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
