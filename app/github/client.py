"""The App's GitHub identity through githubkit: App JWT auth, installation clients, tokens.

Every token the App asks GitHub for carries only the permissions its use needs: the App's
own calls (comments, reactions, reading issues and who may execute) use `ISSUE_PERMISSIONS`;
a token handed to a spawner for a job can only read the job's one repository
(`CLONE_PERMISSIONS`) and is revoked once the job is over (`revoke`).

Installation clients are cached per installation; githubkit caches each installation token
until shortly before it expires. Rate limits and 5xx answers are retried, honouring
`Retry-After` and the reset headers.

The App's own bot login (`<slug>[bot]`, from `GET /app`) is learnt once and remembered: it
is how the App tells its own marked comments from anyone else's.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import GitHubException
from githubkit.retry import RetryChainDecision, RetryRateLimit, RetryServerError
from githubkit_schemas.latest.types import AppPermissionsType

from app.config import Settings
from app.github.github_errors import GitHubError

RETRY = RetryChainDecision(RetryRateLimit(max_retry=3), RetryServerError(max_retry=3))
# The App's own calls: issue comments, reactions, issue reads, collaborator permission.
ISSUE_PERMISSIONS: AppPermissionsType = {"issues": "write", "metadata": "read"}
# A job's token: fetch the one repository, nothing else.
CLONE_PERMISSIONS: AppPermissionsType = {"contents": "read", "metadata": "read"}
# After a failed `GET /app`, wait this long before asking again.
IDENTITY_RETRY_SECONDS = 60.0

log = logging.getLogger(__name__)


class GitHubNotConfigured(GitHubError, RuntimeError):
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
        self._bot_login: str | None = None
        self._identity_tried = float("-inf")

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

    def log_client(self) -> GitHub[Any]:
        """A client as the App (JWT) for its delivery log, with githubkit's retrying off:
        the reader of the log waits out a rate limit between passes, never inside one."""
        return GitHub(
            self._strategy(),
            base_url=self.base_url,
            auto_retry=False,
            cache_strategy=self._cache,
            ssl_verify=self._ssl,
        )

    def installation(self, installation_id: int) -> GitHub[Any]:
        """A client authenticated as `installation_id` with `ISSUE_PERMISSIONS`, reused."""
        with self._lock:
            client = self._installations.get(installation_id)
            if client is None:
                strategy = self._strategy().as_installation(
                    installation_id, permissions=ISSUE_PERMISSIONS
                )
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
        permissions: AppPermissionsType = CLONE_PERMISSIONS,
    ) -> InstallationToken:
        """A fresh short-lived token for one repository (name without owner), with only
        `permissions`."""
        resp = self.app().rest.apps.create_installation_access_token(
            installation_id, repositories=[repository], permissions=permissions
        )
        data = resp.parsed_data
        expires = datetime.fromisoformat(str(data.expires_at).replace("Z", "+00:00"))
        return InstallationToken(token=data.token, expires_at=expires)

    def token_client(self, token: str, *, follow_redirects: bool = True) -> GitHub[Any]:
        """A client calling GitHub with `token` (one `repository_token` minted). Without
        `follow_redirects` a redirect is answered to the caller, who decides where to go."""
        return GitHub(
            TokenAuthStrategy(token),
            base_url=self.base_url,
            auto_retry=RETRY,
            ssl_verify=self._ssl,
            follow_redirects=follow_redirects,
        )

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context the App's GitHub calls verify with (also for a download URL)."""
        return self._ssl

    def revoke(self, token: str) -> None:
        """Withdraw an installation token before it expires (`DELETE /installation/token`)."""
        client = self.token_client(token)  # githubkit's namespaces hold it weakly: keep it
        client.rest.apps.revoke_installation_access_token()

    def bot_login(self) -> str | None:
        """The App's own login (`<slug>[bot]`), learnt from `GET /app`; None while unknown
        (no identity configured, or GitHub did not answer — asked again a minute later)."""
        with self._lock:
            if self._bot_login is not None or not self.configured:
                return self._bot_login
            if time.monotonic() - self._identity_tried < IDENTITY_RETRY_SECONDS:
                return None
            self._identity_tried = time.monotonic()
        try:
            data = self.app().rest.apps.get_authenticated().json()
        except (GitHubException, GitHubNotConfigured, ValueError) as exc:
            log.warning("could not learn the App's bot login from GET /app: %s", exc)
            return None
        slug = data.get("slug") if isinstance(data, dict) else None
        if not isinstance(slug, str) or not slug:
            return None
        with self._lock:
            self._bot_login = f"{slug}[bot]"
        return self._bot_login
