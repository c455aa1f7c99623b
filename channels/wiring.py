"""Building the mirror's clients from settings: the Web API client and the App's `Mirror`.

The mirror is on only when a bot token is configured; without one the App uses
`NullMirror` and nothing here is built.
"""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from app.audit import EventLog
from app.config import OperatorConfig, Settings
from app.mirror import Mirror, NullMirror
from app.store import Sessions
from channels.sender import SlackMirror, SlackSender

log = logging.getLogger(__name__)

API_TIMEOUT = 15


def web_client(settings: Settings) -> WebClient:
    """A Web API client for the bot token; `SLACK_API_URL` points it elsewhere (tests)."""
    base_url = settings.slack_api_url.rstrip("/") + "/"
    return WebClient(token=settings.slack_bot_token, base_url=base_url, timeout=API_TIMEOUT)


def build_mirror(
    settings: Settings, config: OperatorConfig, sessions: Sessions, events: EventLog
) -> Mirror:
    """`SlackMirror` when a bot token is set, else `NullMirror` (the mirror is off)."""
    if not settings.slack_enabled:
        return NullMirror()
    if not config.slack.channel:
        log.warning(
            "SLACK_BOT_TOKEN is set but slack.channel is not: Slack messages are kept in the "
            "outbox and reported as slack.failed until a channel is configured"
        )
    sender = SlackSender(sessions, events, web_client(settings), config.slack.channel)
    return SlackMirror(sender)
