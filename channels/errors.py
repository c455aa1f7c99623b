"""Naming a failed Slack call for logs and events."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError


def slack_error(exc: Exception) -> str:
    """Slack's error code (`ratelimited`, `token_revoked`, …), or the transport error."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error"))
    return f"{type(exc).__name__}: {exc}"
