"""`POST /slack/events` in the App's Flask application, through Bolt's Flask adapter.

Mounted only when a bot token is configured; Bolt checks each request's signature against
`SLACK_SIGNING_SECRET` before any listener runs, so without a secret the route is not
mounted at all.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, request
from slack_bolt.adapter.flask import SlackRequestHandler

from channels.bolt import SlackNotConfigured, build_bolt_app

if TYPE_CHECKING:
    from app.github import Services
    from app.store import Sessions

log = logging.getLogger(__name__)


def init_app(app: Flask, services: Services, sessions: Sessions) -> bool:
    """Mount the Slack route on `app` when the settings enable Slack; returns whether it was
    mounted."""
    if not services.settings.slack_enabled:
        return False
    try:
        bolt = build_bolt_app(services, sessions)
    except SlackNotConfigured as exc:
        log.warning("Slack route not mounted: %s", exc)
        return False
    handler = SlackRequestHandler(bolt)
    blueprint = Blueprint("slack", __name__)

    @blueprint.post("/slack/events")
    def slack_events() -> Response:
        return handler.handle(request)

    app.register_blueprint(blueprint)
    return True
