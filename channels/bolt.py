"""The Bolt app: listeners for the buttons (Execute, review, answer, allow) and thread replies,
over HTTP or Socket Mode.

Bolt verifies every HTTP request against the signing secret. Listeners acknowledge first
and then work (Bolt answers Slack as soon as `ack()` is called and lets the listener run on),
so a slow GitHub call never makes Slack show an error. Each listener is one process edge:
it logs what failed and tells the member, and never raises into Bolt.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_bolt.adapter.socket_mode import SocketModeHandler

from app.github import Services
from app.store import Sessions
from channels.actions import Press, handle_execute
from channels.allow_actions import handle_allow
from channels.allow_blocks import ALLOW_ACTION
from channels.answer_actions import handle_answer
from channels.answer_blocks import ANSWER_ACTION_PATTERN
from channels.channel_errors import ChannelsError
from channels.checklist_control import EXECUTE_ACTION, OPEN_ACTION, ROWS_ACTION
from channels.deps import SlackDeps
from channels.replies import thread_reply
from channels.review_actions import handle_approve, handle_changes_press, handle_changes_view
from channels.threads import handle_message
from channels.walk_blocks import APPROVE_ACTION, CHANGES_ACTION, CHANGES_VIEW
from channels.wiring import web_client

log = logging.getLogger(__name__)

SOMETHING_WENT_WRONG = (
    "Something went wrong on the App's side. The issue on GitHub shows what was recorded; "
    "try again if your decision is not there."
)


class SlackNotConfigured(ChannelsError, RuntimeError):
    """A Slack entry point was started without the settings it needs."""


@dataclass(frozen=True)
class Audience:
    """Who to tell privately when handling their request failed."""

    channel: str
    member: str
    thread_ts: str | None = None


def _guard(deps: SlackDeps, work: Callable[[], None], audience: Audience | None) -> None:
    try:
        work()
    except Exception:  # listener edge: log it, tell the member, keep serving
        log.exception("Slack listener failed")
        if audience is not None and audience.member:
            deps.tell(audience.channel, audience.member, SOMETHING_WENT_WRONG, audience.thread_ts)


def _audience(body: dict[str, Any]) -> Audience:
    container = body.get("container") or {}
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id", "")
    member = (body.get("user") or {}).get("id", "")
    return Audience(str(channel), str(member), container.get("thread_ts"))


def register(app: App, deps: SlackDeps) -> None:
    """Attach the mirror's listeners to `app`."""

    @app.action(EXECUTE_ACTION)
    def on_execute(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        press = Press.from_body(body)
        audience = Audience(press.channel, press.member, press.thread_ts)
        _guard(deps, lambda: handle_execute(deps, body), audience)

    @app.action(APPROVE_ACTION)
    def on_approve(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        _guard(deps, lambda: handle_approve(deps, body), _audience(body))

    @app.action(CHANGES_ACTION)
    def on_changes(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        _guard(deps, lambda: handle_changes_press(deps, body), _audience(body))

    @app.action(re.compile(ANSWER_ACTION_PATTERN))
    def on_answer(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        _guard(deps, lambda: handle_answer(deps, body), _audience(body))

    @app.action(ALLOW_ACTION)
    def on_allow(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        _guard(deps, lambda: handle_allow(deps, body), _audience(body))

    @app.view(CHANGES_VIEW)
    def on_changes_submitted(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        _guard(deps, lambda: handle_changes_view(deps, body), None)

    @app.action(re.compile(f"^({re.escape(ROWS_ACTION)}|{re.escape(OPEN_ACTION)})$"))
    def on_control(ack: Ack) -> None:
        ack()  # ticks and link clicks need no answer; the press of Execute reads the state

    @app.event("message")
    def on_message(event: Mapping[str, Any], context: BoltContext) -> None:
        reply = thread_reply(event, deps.config.slack.channel, context.bot_user_id)
        audience = Audience(reply.channel, reply.user, reply.thread_ts) if reply else None
        _guard(deps, lambda: handle_message(deps, event, context.bot_user_id), audience)


def build_bolt_app(services: Services, sessions: Sessions, *, socket_mode: bool = False) -> App:
    """A Bolt app over the bot token; HTTP mode requires the signing secret."""
    settings = services.settings
    if not settings.slack_bot_token:
        raise SlackNotConfigured("SLACK_BOT_TOKEN is not set")
    if not socket_mode and not settings.slack_signing_secret:
        raise SlackNotConfigured(
            "SLACK_SIGNING_SECRET is not set: the App will not accept unverified Slack requests"
        )
    client = web_client(settings)
    app = App(
        client=client,
        signing_secret=settings.slack_signing_secret or "",
        token_verification_enabled=False,
        request_verification_enabled=not socket_mode,
        logger=log,
    )
    register(app, SlackDeps(services=services, sessions=sessions, client=client))
    return app


def socket_mode_handler(app: App, app_token: str | None) -> SocketModeHandler:
    """Socket Mode for deployments without public ingress (an `xapp-` app-level token)."""
    if not app_token:
        raise SlackNotConfigured("SLACK_APP_TOKEN (xapp-…) is required for Socket Mode")
    return SocketModeHandler(app, app_token=app_token)
