"""The Slack mirror: one thread per work item, the checklist as a Block Kit control, and
replies from the thread back to the issue. Built on slack-bolt; off without a bot token."""

from channels import web
from channels.bolt import SlackNotConfigured, build_bolt_app, socket_mode_handler
from channels.outbox import status
from channels.wiring import build_mirror

__all__ = [
    "SlackNotConfigured",
    "build_bolt_app",
    "build_mirror",
    "socket_mode_handler",
    "status",
    "web",
]
