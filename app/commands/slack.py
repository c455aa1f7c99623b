"""`the-loop slack socket` (the mirror over Socket Mode) and `the-loop slack status`.

Socket Mode is for deployments without public ingress: the process opens an outbound
WebSocket to Slack with the app-level token and runs the same listeners `/slack/events`
runs, plus the mirror's sender. It can run beside `serve` (each outbox row is claimed by
one sender) or alone with `the-loop worker` handling GitHub deliveries.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from typing import Any

from rich.console import Console


def run_socket(args: argparse.Namespace) -> int:
    from app.config import SettingsError, load_settings
    from app.runtime import build_state
    from channels import SlackNotConfigured, build_bolt_app, socket_mode_handler

    settings = load_settings()
    state = build_state(settings)
    try:
        bolt = build_bolt_app(state.services, state.sessions, socket_mode=True)
        handler = socket_mode_handler(bolt, settings.slack_app_token)
    except SlackNotConfigured as exc:
        raise SettingsError(str(exc)) from exc
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    start = getattr(state.services.mirror, "start", None)
    if callable(start):
        start()
    handler.connect()
    Console(stderr=True).print("the-loop: Slack Socket Mode connected")
    stop.wait()
    handler.close()
    state.stop_workers()
    return 0


def status_facts(sessions: Any) -> dict[str, Any]:
    from channels import status

    found = status(sessions)
    return {
        "healthy": found.healthy,
        "queued": found.queued,
        "retrying": found.retrying,
        "failed": found.failed,
        "oldest_queued_at": found.oldest_queued_at.isoformat() if found.oldest_queued_at else None,
        "last_error": found.last_error,
    }


def run_status(args: argparse.Namespace) -> int:
    from app.config import load_settings
    from app.store import Sessions, make_engine, migrate

    settings = load_settings()
    engine = make_engine(settings.database_url)
    migrate(engine)
    facts = status_facts(Sessions(engine))
    engine.dispose()
    if args.json:
        print(json.dumps(facts))
    else:
        mirror = "on" if settings.slack_enabled else "off (no SLACK_BOT_TOKEN)"
        Console().print(f"Slack mirror: {mirror}")
        for key, value in facts.items():
            Console().print(f"  {key}: {value}")
    return 0 if facts["healthy"] else 1


def register(subparsers: Any) -> None:
    slack = subparsers.add_parser("slack", help="the Slack mirror: Socket Mode runner, outbox")
    commands = slack.add_subparsers(dest="slack_command", metavar="SLACK_COMMAND")
    socket = commands.add_parser(
        "socket", help="receive Slack events over Socket Mode (needs SLACK_APP_TOKEN)"
    )
    socket.set_defaults(func=run_socket)
    status = commands.add_parser(
        "status", help="messages waiting for Slack; exit 1 while any is failing"
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(func=run_status)
