"""Who may execute a work item or direct its session.

`routing.authorizedUsers` when the operator declared it; otherwise anyone whose permission on
the repository is write, maintain or admin (asked through the API, cached briefly).
"""

from __future__ import annotations

from app.config import OperatorConfig
from app.github import GitHubApp, PermissionCache, Services

PERMITTED_ROLES = frozenset({"write", "maintain", "admin"})


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


def refusal(services: Services, installation_id: int | None, repo: str, login: str) -> str | None:
    """`why_not_authorized` with the App's permission cache: the one rule every surface
    (an execute, a follow-up, a Slack press, an approval) applies."""
    return why_not_authorized(
        services.config, services.github, services.permissions, installation_id, repo, login
    )
