"""The App's GitHub identity through githubkit: App JWT auth, installation clients, tokens.

Installation clients are cached per installation; githubkit caches each installation token
until shortly before it expires. Rate limits and 5xx answers are retried, honouring
`Retry-After` and the reset headers.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.retry import RetryChainDecision, RetryRateLimit, RetryServerError

from app.settings import Settings

RETRY = RetryChainDecision(RetryRateLimit(max_retry=3), RetryServerError(max_retry=3))


class GitHubNotConfigured(RuntimeError):
    """The App id or private key is missing; `the-loop setup` writes them."""


@dataclass(frozen=True)
class InstallationToken:
    token: str
    expires_at: datetime


class GitHubApp:
    """Factory for githubkit clients acting as the App or as one of its installations."""

    def __init__(self, settings: Settings) -> None:
        self.base_url = settings.github_api_url.rstrip("/") + "/"
        self._app_id = settings.github_app_id
        self._private_key = settings.private_key() if settings.github_app_id else None
        self._lock = threading.Lock()
        self._installations: dict[int, GitHub[Any]] = {}
        self._app: GitHub[Any] | None = None
        # One token cache per App identity (githubkit's default cache is process-global).
        self._cache = MemCacheStrategy()
        # githubkit opens an HTTP client per call; one SSL context spares loading the CA
        # bundle on every request.
        self._ssl = ssl.create_default_context()

    @property
    def configured(self) -> bool:
        return bool(self._app_id and self._private_key)

    def _strategy(self) -> AppAuthStrategy:
        if not (self._app_id and self._private_key):
            raise GitHubNotConfigured("GITHUB_APP_ID and GITHUB_PRIVATE_KEY are not set")
        return AppAuthStrategy(self._app_id, self._private_key)

    def app(self) -> GitHub[Any]:
        """A client authenticated as the App itself (JWT)."""
        with self._lock:
            if self._app is None:
                self._app = GitHub(
                    self._strategy(),
                    base_url=self.base_url,
                    auto_retry=RETRY,
                    cache_strategy=self._cache,
                    ssl_verify=self._ssl,
                )
            return self._app

    def installation(self, installation_id: int) -> GitHub[Any]:
        """A client authenticated as `installation_id`, reused across calls."""
        with self._lock:
            client = self._installations.get(installation_id)
            if client is None:
                strategy = self._strategy().as_installation(installation_id)
                client = GitHub(
                    strategy,
                    base_url=self.base_url,
                    auto_retry=RETRY,
                    cache_strategy=self._cache,
                    ssl_verify=self._ssl,
                )
                self._installations[installation_id] = client
            return client

    def repository_token(
        self,
        installation_id: int,
        repository: str,
        permissions: dict[str, str] | None = None,
    ) -> InstallationToken:
        """A fresh short-lived token scoped to one repository (name without owner), and to
        `permissions` when given (e.g. `{"contents": "write"}`; else the installation's)."""
        scope: dict[str, Any] = {"repositories": [repository]}
        if permissions:
            scope["permissions"] = dict(permissions)
        resp = self.app().rest.apps.create_installation_access_token(
            installation_id, data=cast(Any, scope)
        )
        data = resp.parsed_data
        expires = datetime.fromisoformat(str(data.expires_at).replace("Z", "+00:00"))
        return InstallationToken(token=data.token, expires_at=expires)
